//! What reviewing and undoing report: the views of plans, runs, undos and version chains that
//! the use cases return ([`crate::memory::views`] re-exports them).

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::planning::consolidate::pass::OpReport;
use crate::planning::diff::{self, DiffStat};
use crate::planning::run::plan::Change as EntryChange;
use crate::planning::run::records::{PlanHead, PlanReason, PlanStatus, SeenEntry};
use memfold_models::llm::Usage;
use memfold_store::archive::Fact;
use memfold_store::entries::HistoryStatus;
use memfold_store::ledger::FactFate;

/// A stored plan as shown to people (`memfold plans --json`, `GET /plans`).
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    pub id: String,
    pub status: PlanStatus,
    pub reason: PlanReason,
    pub created: DateTime<Utc>,
    pub rejected: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired: Option<DateTime<Utc>>,
    /// Why it was rejected, or applied, as the person said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    pub left_alone: Vec<SeenEntry>,
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
    pub fate: FactFate,
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
    /// Ops undone one by one or by group (1-based).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undone_ops: Vec<usize>,
    /// `merge` or `supersede` for a change a person asked for by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// The notes of the run: why it was asked for or its plan applied, and why it (or ops of
    /// it) were undone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// An applied run with its ops in groups (`memfold run <id>`, `GET /runs/{id}`): what
/// `undo --op N` and `--group N` name.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub run: RunView,
    pub groups: Vec<GroupView>,
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
    /// The ops undone (1-based), when only some were (`--op`, `--group`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<usize>,
    /// What rewriting `MEMORY.md` afterwards cost.
    pub llm: Usage,
}

/// Where a version of an entry stands: current in `memory.md`, or in `history.md` with the
/// status written there (none on a version written without one).
#[derive(Debug, Clone, PartialEq)]
pub enum VersionStatus {
    Current,
    History(Option<HistoryStatus>),
}

impl VersionStatus {
    pub fn as_str(&self) -> &str {
        match self {
            VersionStatus::Current => "current",
            VersionStatus::History(Some(status)) => status.as_str(),
            VersionStatus::History(None) => "history",
        }
    }

    pub fn is_current(&self) -> bool {
        *self == VersionStatus::Current
    }
}

impl std::fmt::Display for VersionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for VersionStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One version of an entry, current or in history.
#[derive(Debug, Clone, Serialize)]
pub struct Version {
    pub id: String,
    /// `current`, or the history status (`replaced`, `merged`, `deleted`, `reverted`, …).
    pub status: VersionStatus,
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
        ) + &self.note.as_ref().map(|n| format!("; note: {n}")).unwrap_or_default()
    }
}

impl PlanView {
    pub(super) fn new(plan: &PlanHead, memory_hash: &str) -> PlanView {
        PlanView {
            id: plan.id.clone(),
            status: plan.status,
            reason: plan.reason.clone(),
            created: plan.created,
            rejected: plan.rejected,
            expired: plan.expired,
            note: plan.note.clone(),
            pass: plan.pass.clone(),
            // Only a plan that can still be applied can be stale.
            stale: plan.status == PlanStatus::Pending && plan.memory_hash_before != memory_hash,
            ops: plan.journal.iter().map(|r| OpReport::from(&r.op)).collect(),
            facts: plan.facts.iter().map(|f| f.id.clone()).collect(),
            entries: plan.touched.iter().cloned().collect(),
            diff: plan.diff.clone(),
            stat: diff::stat(&plan.diff),
            llm: plan.llm,
        }
    }
}
