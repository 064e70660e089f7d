//! Review and reversal of consolidation: stored plans, the run log, undo, and entry history chains.
//!
//! **Plans.** With `consolidation.mode = "review"` a pass stores its whole plan under
//! `.memfold/plans/<id>.json` instead of applying it; in `auto` mode only the ops the decider
//! gave a confidence below `consolidation.review_below_confidence` are stored (planned on top
//! of what the pass applied), the rest apply. A plan file holds what [`apply`] needs to write
//! it later (the new `memory.md`, history blocks, journal records, the facts) plus a unified
//! diff for people. The plan id is the id of the run that applying it creates. Facts in a
//! pending plan are left out of every pass until the plan is applied or rejected.
//!
//! [`apply_plan`] writes exactly the stored `memory.md` when the file still hashes to what the
//! plan was made against. Otherwise the plan is rebased: its ops are replayed on the current
//! file, which is allowed only when every entry the plan changes is still exactly as the plan
//! saw it (the replay then changes the same entries the same way); if not, it is refused with
//! the ids in the way. [`reject_plan`] keeps the file (status `rejected`) and returns its facts
//! to pending, flagged with [`FactProgress::reverted_run`](crate::state::FactProgress).
//!
//! **Runs.** [`apply`] writes `.memfold/runs/<run>.json` next to the journal: the text of
//! `memory.md` before the run and its hash after, so that [`undo`] can restore it byte for byte
//! when nothing changed it since. When something did, undo works entry by entry from the
//! journal: every entry the run touched must still be exactly as the run left it, or the
//! undo is refused with the conflicting ids and nothing is written. Only the newest
//! [`RUNS_WITH_COPIES`] records keep their copy of `memory.md` (byte-for-byte undo of an older
//! run needs every later run undone first, and the copies add up); older ones keep the hashes,
//! and their undo works entry by entry, putting removed entries back at the end of the file.
//! An undo moves the undone
//! versions to `history.md` with `status: reverted`, marks the history blocks the run wrote
//! for the versions it puts back `status: restored` (neither kind accounts for facts any
//! more), puts the previous versions back, removes what the run added, lowers the watermark
//! below the facts that are pending again, and flags them.
//!
//! **Flagged facts** (`reverted_run` set, by an undo or a rejection) stay pending but are left
//! out of automatic passes, so the same decision is not made again by itself; a forced pass
//! (`memfold consolidate --force`, `POST /consolidate {"force":true}`) includes them, which
//! is how a person asks for a new decision. The flag clears once the fact is consolidated.
//!
//! Every function here does blocking file IO (call it from `spawn_blocking` in async code),
//! takes the consolidation lock when it writes, and leaves reindexing and promotion to the
//! caller.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::config::Mode;
use crate::consolidate::apply::{ApplyError, apply};
use crate::consolidate::ops::ProposedOp;
use crate::consolidate::pass::OpReport;
use crate::consolidate::plan::{JournalRecord, Plan, Planner};
use crate::diff::{self, DiffStat};
use crate::files::archive::Fact;
use crate::files::atomic::{WriteError, write_atomic};
use crate::files::entries::{Entry, EntryFile, EntryMeta, Item};
use crate::files::{Root, content_hash, write_memory};
use crate::forget::ForgetError;
use crate::ledger::{FactFate, Ledger, LedgerError};
use crate::llm::Usage;
use crate::lock::{LockError, LockGuard};
use crate::state::{StateError, read_jsonl};

/// Version of the plan and run files this build writes.
pub const FORMAT_VERSION: u32 = 1;

/// Run records that keep the text of `memory.md` from before their run.
pub const RUNS_WITH_COPIES: usize = 20;

const MEMORY: &str = "consolidated/memory.md";
/// Lines of context in plan diffs.
const CONTEXT: usize = 3;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// No such plan, run or entry (HTTP 404).
    #[error("no {what} {id}")]
    NotFound { what: &'static str, id: String },
    /// A malformed request, e.g. an id that cannot name a plan or run (HTTP 400).
    #[error("{0}")]
    BadInput(String),
    /// Refused because of what the files hold now: an undo whose entries changed since the
    /// run, a run already undone, a rejected plan, a plan whose facts were forgotten (HTTP 409).
    /// `ids` names the entries, facts or runs in the way.
    #[error("{message}")]
    Conflict { message: String, ids: Vec<String> },
    /// A plan made against a `memory.md` that has changed in entries the plan changes too
    /// (HTTP 409).
    #[error("{message}")]
    Stale { message: String, ids: Vec<String> },
    /// Another pass, apply or undo holds the consolidation lock (HTTP 409).
    #[error(transparent)]
    Busy(LockError),
    #[error(transparent)]
    Lock(LockError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Apply(ApplyError),
    #[error("reconciling hand edits of memory.md: {0}")]
    Reconcile(#[from] ForgetError),
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a valid record ({message}); move it aside")]
    Corrupt { path: String, message: String },
}

impl From<LockError> for ReviewError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Held { .. } => ReviewError::Busy(e),
            other => ReviewError::Lock(other),
        }
    }
}

impl From<ApplyError> for ReviewError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Stale => ReviewError::Stale {
                message: "consolidated/memory.md changed while the plan was being written; nothing was written".into(),
                ids: Vec::new(),
            },
            other => ReviewError::Apply(other),
        }
    }
}

impl ReviewError {
    /// The fitting HTTP status: 404 not found, 400 bad input, 409 conflict/stale/busy, else 500.
    pub fn http_status(&self) -> u16 {
        match self {
            ReviewError::NotFound { .. } => 404,
            ReviewError::BadInput(_) => 400,
            ReviewError::Conflict { .. } | ReviewError::Stale { .. } | ReviewError::Busy(_) => 409,
            _ => 500,
        }
    }

    /// A short machine-readable code for `{"error":{"code","message"}}`.
    pub fn code(&self) -> &'static str {
        match self {
            ReviewError::NotFound { .. } => "not_found",
            ReviewError::BadInput(_) => "bad_request",
            ReviewError::Conflict { .. } => "conflict",
            ReviewError::Stale { .. } => "stale",
            ReviewError::Busy(_) => "busy",
            _ => "internal",
        }
    }

    /// The entries, facts or runs a conflict names (empty for other errors).
    pub fn ids(&self) -> &[String] {
        match self {
            ReviewError::Conflict { ids, .. } | ReviewError::Stale { ids, .. } => ids,
            _ => &[],
        }
    }
}

// ---------------------------------------------------------------------------------------------
// On-disk formats

/// Whether a stored plan still waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanStatus {
    Pending,
    Rejected,
}

/// `.memfold/plans/<id>.json`: a plan waiting for `apply` or `reject`. Applied plans are
/// removed (their run record takes over); rejected ones are kept with `status: rejected`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredPlan {
    pub version: u32,
    /// Also the id of the run that applying the plan creates.
    pub id: String,
    pub status: PlanStatus,
    /// `review` (mode = review) or `low-confidence` (ops an auto pass held back).
    pub reason: String,
    /// When the plan was made; the planning clock, so a rebase renders the same blocks.
    pub created: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<DateTime<Utc>>,
    /// The pass that made the plan (for held low-confidence ops, the run that applied the rest).
    pub pass: String,
    /// Hash of `memory.md` the plan was made against.
    pub memory_hash_before: String,
    /// `memory.md` as applying the plan writes it.
    pub memory_after: String,
    /// Unified diff of `memory.md`, for people.
    pub diff: String,
    /// Old versions appended to `history.md` on apply (rendered blocks).
    pub history: Vec<String>,
    /// The ops, with their reasons, signals, confidence and per-entry before/after blocks.
    pub journal: Vec<JournalRecord>,
    /// The facts the ops name, as archived.
    pub facts: Vec<Fact>,
    pub facts_done: BTreeSet<String>,
    pub touched: BTreeSet<String>,
    /// What deciding the plan cost.
    #[serde(default)]
    pub llm: Usage,
}

/// How an undo went, kept in the run record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoRecord {
    pub time: DateTime<Utc>,
    /// `memory.md` was restored byte for byte.
    pub exact: bool,
    pub restored: Vec<String>,
    pub removed: Vec<String>,
    pub facts: Vec<String>,
}

/// `.memfold/runs/<run>.json`: one applied run, written by [`apply`] next to the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub version: u32,
    pub run: String,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    /// The stored plan this run applied, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Ops by kind (`ADD`, `REPLACE`, `REMOVE`, `DUPLICATE`).
    pub ops: BTreeMap<String, usize>,
    pub facts: Vec<String>,
    pub entries: Vec<String>,
    pub history_blocks: usize,
    #[serde(default)]
    pub llm: Usage,
    /// Hashes and text of `memory.md` around the run (empty when unknown).
    #[serde(default)]
    pub memory_hash_before: String,
    #[serde(default)]
    pub memory_hash_after: String,
    #[serde(default)]
    pub memory_before: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone: Option<UndoRecord>,
}

impl RunRecord {
    /// Whether `memory_before` is the text the run started from: false once the copy was
    /// dropped (see [`RUNS_WITH_COPIES`]) and for records that never had one. A run on an
    /// empty file has an empty copy that is still true.
    fn has_copy(&self) -> bool {
        content_hash(&self.memory_before) == self.memory_hash_before
    }
}

fn runs_dir(root: &Root) -> PathBuf {
    root.state_dir().join("runs")
}

fn run_path(root: &Root, run: &str) -> PathBuf {
    runs_dir(root).join(format!("{run}.json"))
}

fn plan_path(root: &Root, id: &str) -> PathBuf {
    root.plans_dir().join(format!("{id}.json"))
}

/// Plan and run ids name files: letters, digits, `-`, `_`, `.`, not starting with a dot.
fn check_id(what: &str, id: &str) -> Result<(), ReviewError> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(()) } else { Err(ReviewError::BadInput(format!("{id:?} is not a valid {what} id"))) }
}

fn read_json<T: serde::de::DeserializeOwned>(root: &Root, path: &Path) -> Result<Option<T>, ReviewError> {
    let shown = root.relative(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ReviewError::Read { path: shown, source }),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| ReviewError::Corrupt { path: shown, message: e.to_string() })
}

/// Write JSON atomically; with `new`, refuse if the file exists.
fn write_json(path: &Path, value: &impl Serialize, new: bool) -> Result<(), WriteError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| WriteError::Io { path: dir.to_path_buf(), source })?;
    }
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    let empty = content_hash(b"");
    write_atomic(path, text.as_bytes(), new.then_some(empty.as_str()))
}

/// A rendered block back as an entry (rendered anew when written).
fn block_entry(block: &str) -> Option<Entry> {
    let file = EntryFile::parse(block, "block");
    file.entries().next().map(|e| Entry::new(e.meta.clone(), &e.content))
}

// ---------------------------------------------------------------------------------------------
// Plans made by a pass

/// Split validated ops into those to apply now and those held for review: ops whose
/// confidence is below `below`. Ops without a confidence apply.
pub fn split_low_confidence(ops: Vec<ProposedOp>, below: f64) -> (Vec<ProposedOp>, Vec<ProposedOp>) {
    ops.into_iter().partition(|op| op.confidence.is_none_or(|c| c >= below))
}

/// What a pass hands to a person instead of applying.
#[derive(Debug, Clone)]
pub struct ForReview {
    plan: Plan,
    facts: Vec<Fact>,
    reason: &'static str,
    pass: String,
    created: DateTime<Utc>,
}

/// Decide what a pass applies now and what it stores for review (pure). In review mode the
/// whole plan is stored and nothing applies; in auto mode the `held` ops are planned on top of
/// the applied plan. `now` must be the planner's clock.
pub fn divert(
    plan: Plan,
    held: &[ProposedOp],
    facts: &HashMap<String, Fact>,
    mode: Mode,
    now: DateTime<Utc>,
) -> (Plan, Option<ForReview>) {
    let pick = |plan: &Plan| -> Vec<Fact> {
        let named: BTreeSet<&str> =
            plan.journal.iter().flat_map(|r| r.op.op.facts().iter().map(String::as_str)).collect();
        named.into_iter().filter_map(|id| facts.get(id)).cloned().collect()
    };
    match mode {
        Mode::Review if !plan.journal.is_empty() => {
            let nothing = Plan {
                memory_after: plan.memory_before.clone(),
                history: Vec::new(),
                journal: Vec::new(),
                facts_done: BTreeSet::new(),
                touched: BTreeSet::new(),
                ..plan.clone()
            };
            let review = ForReview { facts: pick(&plan), reason: "review", pass: plan.run.clone(), created: now, plan };
            (nothing, Some(review))
        }
        Mode::Auto if !held.is_empty() => {
            // The held ops apply to memory.md as this pass leaves it.
            let (base, hash) = if plan.journal.is_empty() {
                (plan.memory_before.clone(), plan.memory_hash_before.clone())
            } else {
                (plan.memory_after.clone(), content_hash(&plan.memory_after))
            };
            let mut planner = Planner::new(EntryFile::parse(&base, MEMORY), facts, format!("{}-review", plan.run), now);
            planner.apply(held);
            let mut held_plan = planner.finish(hash);
            held_plan.memory_before = base;
            let review = (!held_plan.journal.is_empty()).then(|| ForReview {
                facts: pick(&held_plan),
                reason: "low-confidence",
                pass: plan.run.clone(),
                created: now,
                plan: held_plan,
            });
            (plan, review)
        }
        _ => (plan, None),
    }
}

impl ForReview {
    /// The id the plan will be stored under.
    pub fn id(&self) -> &str {
        &self.plan.run
    }

    /// Write `.memfold/plans/<id>.json`; returns the id.
    pub fn store(&self, root: &Root) -> Result<String, ReviewError> {
        let plan = &self.plan;
        let stored = StoredPlan {
            version: FORMAT_VERSION,
            id: plan.run.clone(),
            status: PlanStatus::Pending,
            reason: self.reason.to_string(),
            created: self.created,
            rejected: None,
            pass: self.pass.clone(),
            memory_hash_before: plan.memory_hash_before.clone(),
            memory_after: plan.memory_after.clone(),
            diff: diff::unified(&plan.memory_before, &plan.memory_after, MEMORY, CONTEXT),
            history: plan.history.iter().map(Entry::render).collect(),
            journal: plan.journal.clone(),
            facts: self.facts.clone(),
            facts_done: plan.facts_done.clone(),
            touched: plan.touched.clone(),
            llm: plan.llm,
        };
        match write_json(&plan_path(root, &stored.id), &stored, true) {
            Ok(()) => {}
            Err(WriteError::Stale { .. }) => {
                return Err(ReviewError::Conflict {
                    message: format!("a plan {} exists already", stored.id),
                    ids: vec![stored.id],
                });
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(plan = %stored.id, reason = self.reason, ops = stored.journal.len(), "plan stored for review");
        Ok(stored.id)
    }
}

/// Fact ids named by pending plans: passes leave them out until the plan is applied or rejected.
pub fn facts_under_review(root: &Root) -> HashSet<String> {
    stored_plans(root)
        .into_iter()
        .filter(|p| p.status == PlanStatus::Pending)
        .flat_map(|p| p.facts.into_iter().map(|f| f.id))
        .collect()
}

/// Every readable plan file, oldest first; unreadable ones are logged and skipped.
fn stored_plans(root: &Root) -> Vec<StoredPlan> {
    let Ok(dir) = std::fs::read_dir(root.plans_dir()) else { return Vec::new() };
    let mut plans: Vec<StoredPlan> = dir
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|path| match read_json::<StoredPlan>(root, &path) {
            Ok(plan) => plan,
            Err(e) => {
                tracing::warn!(error = %e, "plan file skipped");
                None
            }
        })
        .collect();
    plans.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    plans
}

fn load_plan(root: &Root, id: &str) -> Result<StoredPlan, ReviewError> {
    check_id("plan", id)?;
    read_json(root, &plan_path(root, id))?.ok_or_else(|| ReviewError::NotFound { what: "plan", id: id.to_string() })
}

// ---------------------------------------------------------------------------------------------
// Plans: list, apply, reject

/// A stored plan as shown to people (`memfold plans --json`, `GET /plans`).
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    pub id: String,
    pub status: PlanStatus,
    pub reason: String,
    pub created: DateTime<Utc>,
    pub rejected: Option<DateTime<Utc>>,
    pub pass: String,
    /// `memory.md` changed since the plan was made: apply will rebase it or refuse.
    pub stale: bool,
    pub ops: Vec<OpReport>,
    pub facts: Vec<String>,
    pub entries: Vec<String>,
    pub diff: String,
    pub stat: DiffStat,
    pub llm: Usage,
}

impl PlanView {
    fn new(plan: &StoredPlan, memory_hash: &str) -> PlanView {
        PlanView {
            id: plan.id.clone(),
            status: plan.status,
            reason: plan.reason.clone(),
            created: plan.created,
            rejected: plan.rejected,
            pass: plan.pass.clone(),
            stale: plan.memory_hash_before != memory_hash,
            ops: plan.journal.iter().map(|r| OpReport::from(&r.op)).collect(),
            facts: plan.facts.iter().map(|f| f.id.clone()).collect(),
            entries: plan.touched.iter().cloned().collect(),
            diff: plan.diff.clone(),
            stat: diff::stat(&plan.diff),
            llm: plan.llm,
        }
    }
}

fn memory_hash(root: &Root) -> Result<String, ReviewError> {
    crate::files::atomic::current_hash(&root.memory())
        .map_err(|source| ReviewError::Read { path: MEMORY.into(), source })
}

/// Stored plans, pending and rejected, oldest first.
pub fn plans(root: &Root) -> Result<Vec<PlanView>, ReviewError> {
    let hash = memory_hash(root)?;
    Ok(stored_plans(root).iter().map(|p| PlanView::new(p, &hash)).collect())
}

/// One stored plan.
pub fn plan(root: &Root, id: &str) -> Result<PlanView, ReviewError> {
    let stored = load_plan(root, id)?;
    Ok(PlanView::new(&stored, &memory_hash(root)?))
}

/// What [`apply_plan`] did.
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
}

/// Apply a stored plan (see the module docs for when it is rebased or refused).
pub fn apply_plan(root: &Root, id: &str) -> Result<AppliedPlan, ReviewError> {
    check_id("plan", id)?;
    let _lock = LockGuard::try_acquire(&root.consolidate_lock(), "consolidation")?;
    crate::forget::reconcile_locked(root)?;
    let stored = load_plan(root, id)?;
    if stored.status == PlanStatus::Rejected {
        return Err(ReviewError::Conflict {
            message: format!("plan {id} was rejected; its facts are pending again"),
            ids: vec![id.to_string()],
        });
    }
    if run_path(root, &stored.id).exists() {
        remove_plan(root, id);
        return Err(ReviewError::Conflict { message: format!("plan {id} was applied already"), ids: vec![id.into()] });
    }
    let ledger = Ledger::load(root)?;
    let fates = ledger.fates();
    let forgotten: Vec<String> = stored
        .facts
        .iter()
        .filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Tombstoned))
        .map(|f| f.id.clone())
        .collect();
    if !forgotten.is_empty() {
        return Err(ReviewError::Conflict {
            message: format!("plan {id} uses facts forgotten since it was made ({}); reject it", forgotten.join(", ")),
            ids: forgotten,
        });
    }
    let current = ledger.memory.render();
    let (plan, rebased) = if ledger.memory.hash == stored.memory_hash_before {
        (exact_plan(&stored, current.clone())?, false)
    } else {
        (rebase(&stored, &ledger.memory)?, true)
    };
    apply(root, &plan, Utc::now())?;
    remove_plan(root, id);
    tracing::info!(plan = %id, rebased, ops = plan.journal.len(), "plan applied");
    Ok(AppliedPlan {
        plan: id.to_string(),
        run: plan.run.clone(),
        rebased,
        ops: plan.journal.len(),
        facts: plan.facts_done.iter().cloned().collect(),
        entries: plan.touched.iter().cloned().collect(),
        diff: diff::unified(&current, &plan.memory_after, MEMORY, CONTEXT),
    })
}

fn remove_plan(root: &Root, id: &str) {
    if let Err(e) = std::fs::remove_file(plan_path(root, id))
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(plan = %id, error = %e, "could not remove an applied plan file");
    }
}

/// The stored plan as written, against the `memory.md` it was made for.
fn exact_plan(stored: &StoredPlan, memory_before: String) -> Result<Plan, ReviewError> {
    let history = stored.history.iter().map(|b| block_entry(b)).collect::<Option<Vec<Entry>>>().ok_or_else(|| {
        ReviewError::Corrupt {
            path: format!(".memfold/plans/{}.json", stored.id),
            message: "a history block does not parse".into(),
        }
    })?;
    Ok(Plan {
        run: stored.id.clone(),
        memory_hash_before: stored.memory_hash_before.clone(),
        memory_before,
        memory_after: stored.memory_after.clone(),
        history,
        journal: stored.journal.clone(),
        facts_done: stored.facts_done.clone(),
        touched: stored.touched.clone(),
        llm: stored.llm,
        from_plan: Some(stored.id.clone()),
    })
}

/// Replay a plan's ops on the current `memory.md`, if every entry it changes is as it saw it.
fn rebase(stored: &StoredPlan, current: &EntryFile) -> Result<Plan, ReviewError> {
    let mut seen = HashSet::new();
    let mut conflicts = Vec::new();
    for change in stored.journal.iter().flat_map(|r| &r.changes) {
        if seen.insert(change.entry.as_str())
            && current.get(&change.entry).map(Entry::render).as_deref() != change.before.as_deref()
        {
            conflicts.push(change.entry.clone());
        }
    }
    let stale = |ids: Vec<String>| ReviewError::Stale {
        message: format!(
            "consolidated/memory.md changed since plan {} was made, and so did entries it changes ({}); \
             reject the plan (its facts return to pending) and consolidate again",
            stored.id,
            ids.join(", ")
        ),
        ids,
    };
    if !conflicts.is_empty() {
        return Err(stale(conflicts));
    }
    let facts: HashMap<String, Fact> = stored.facts.iter().map(|f| (f.id.clone(), f.clone())).collect();
    let ops: Vec<ProposedOp> = stored.journal.iter().map(|r| r.op.clone()).collect();
    let mut planner = Planner::new(current.clone(), &facts, stored.id.clone(), stored.created);
    planner.apply(&ops);
    let mut plan = planner.finish(current.hash.clone());
    let same = plan.journal.len() == stored.journal.len()
        && plan.journal.iter().zip(&stored.journal).all(|(a, b)| a.changes == b.changes);
    if !same {
        return Err(stale(stored.touched.iter().cloned().collect()));
    }
    plan.llm = stored.llm;
    plan.from_plan = Some(stored.id.clone());
    Ok(plan)
}

/// What [`reject_plan`] did.
#[derive(Debug, Clone, Serialize)]
pub struct RejectedPlan {
    pub plan: String,
    /// Facts pending again, flagged so automatic passes leave them out.
    pub facts: Vec<String>,
}

/// Reject a stored plan: nothing is written to markdown, its facts stay pending (flagged).
/// Rejecting a rejected plan again changes nothing.
pub fn reject_plan(root: &Root, id: &str) -> Result<RejectedPlan, ReviewError> {
    check_id("plan", id)?;
    let _lock = LockGuard::try_acquire(&root.consolidate_lock(), "consolidation")?;
    let mut stored = load_plan(root, id)?;
    let ledger = Ledger::load(root)?;
    let fates = ledger.fates();
    let facts: Vec<String> = stored
        .facts
        .iter()
        .filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending))
        .map(|f| f.id.clone())
        .collect();
    if stored.status == PlanStatus::Rejected {
        return Ok(RejectedPlan { plan: id.to_string(), facts });
    }
    // Flag first: a crash before the plan file is rewritten leaves the plan pending, not its facts unflagged.
    let mut state = ledger.state;
    for fact in &facts {
        state.facts.entry(fact.clone()).or_default().reverted_run = Some(id.to_string());
    }
    state.save(&root.state_json())?;
    stored.status = PlanStatus::Rejected;
    stored.rejected = Some(Utc::now());
    write_json(&plan_path(root, id), &stored, false)?;
    tracing::info!(plan = %id, facts = facts.len(), "plan rejected");
    Ok(RejectedPlan { plan: id.to_string(), facts })
}

// ---------------------------------------------------------------------------------------------
// Runs

/// Write `.memfold/runs/<run>.json` for an applied plan (called by [`apply`]).
pub fn record_run(root: &Root, plan: &Plan, started: DateTime<Utc>, finished: DateTime<Utc>) -> Result<(), WriteError> {
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for r in &plan.journal {
        *ops.entry(r.op.op.kind().to_string()).or_default() += 1;
    }
    let record = RunRecord {
        version: FORMAT_VERSION,
        run: plan.run.clone(),
        started,
        finished,
        plan: plan.from_plan.clone(),
        ops,
        facts: plan.facts_done.iter().cloned().collect(),
        entries: plan.touched.iter().cloned().collect(),
        history_blocks: plan.history.len(),
        llm: plan.llm,
        memory_hash_before: plan.memory_hash_before.clone(),
        memory_hash_after: content_hash(&plan.memory_after),
        memory_before: plan.memory_before.clone(),
        undone: None,
    };
    write_json(&run_path(root, &plan.run), &record, false)?;
    if let Err(e) = drop_old_copies(root, RUNS_WITH_COPIES) {
        tracing::warn!(error = %e, "could not drop memory.md copies from old run records");
    }
    Ok(())
}

/// Empty `memory_before` in every run record but the newest `keep` (run ids begin with their
/// start time, so file names sort by age). Going from new to old, it stops at the first record
/// already without a copy: the ones before it were emptied by earlier runs. (An empty copy,
/// from a run on an empty file, is a copy: it does not stop the walk.)
fn drop_old_copies(root: &Root, keep: usize) -> Result<(), ReviewError> {
    let dir = runs_dir(root);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|source| ReviewError::Read { path: root.relative(&dir), source })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let old = paths.len().saturating_sub(keep);
    for path in paths[..old].iter().rev() {
        // A record that does not parse is left as it is; `runs` reports it.
        let Ok(Some(mut record)) = read_json::<RunRecord>(root, path) else { continue };
        if !record.has_copy() {
            break;
        }
        if !record.memory_before.is_empty() {
            record.memory_before.clear();
            write_json(path, &record, false)?;
        }
    }
    Ok(())
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
    /// Decision calls and tokens, when recorded.
    pub llm: Option<Usage>,
    pub undone: Option<DateTime<Utc>>,
}

fn journal(root: &Root) -> Result<Vec<JournalRecord>, ReviewError> {
    let (records, problems) = read_jsonl::<JournalRecord>(&root.journal(), ".memfold/journal.jsonl")?;
    for p in problems {
        tracing::warn!(problem = %p, "journal record skipped");
    }
    Ok(records)
}

/// Applied runs, oldest first: every run in the journal, with its run record where there is one.
pub fn runs(root: &Root) -> Result<Vec<RunView>, ReviewError> {
    let mut by_run: BTreeMap<String, RunView> = BTreeMap::new();
    let mut facts: HashMap<String, BTreeSet<String>> = HashMap::new();
    for r in journal(root)? {
        let view = by_run.entry(r.run.clone()).or_insert_with(|| RunView {
            run: r.run.clone(),
            time: r.time,
            started: None,
            plan: None,
            ops: BTreeMap::new(),
            facts: 0,
            entries: Vec::new(),
            llm: None,
            undone: None,
        });
        *view.ops.entry(r.op.op.kind().to_string()).or_default() += 1;
        for c in &r.changes {
            if !view.entries.contains(&c.entry) {
                view.entries.push(c.entry.clone());
            }
        }
        facts.entry(r.run.clone()).or_default().extend(r.op.op.facts().iter().cloned());
    }
    for (run, view) in by_run.iter_mut() {
        view.facts = facts.get(run).map_or(0, BTreeSet::len);
        if let Some(record) = read_json::<RunRecord>(root, &run_path(root, run))? {
            view.time = record.finished;
            view.started = Some(record.started);
            view.plan = record.plan;
            view.facts = record.facts.len();
            view.llm = Some(record.llm);
            view.undone = record.undone.map(|u| u.time);
        }
    }
    let mut runs: Vec<RunView> = by_run.into_values().collect();
    runs.sort_by(|a, b| (a.time, &a.run).cmp(&(b.time, &b.run)));
    Ok(runs)
}

/// What [`undo`] did.
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
}

/// One entry's net change in a run: its first `before` and last `after`.
struct NetChange {
    entry: String,
    before: Option<String>,
    after: Option<String>,
}

fn net_changes(records: &[&JournalRecord]) -> Vec<NetChange> {
    let mut out: Vec<NetChange> = Vec::new();
    for change in records.iter().flat_map(|r| &r.changes) {
        match out.iter_mut().find(|n| n.entry == change.entry) {
            Some(net) => net.after = change.after.clone(),
            None => out.push(NetChange {
                entry: change.entry.clone(),
                before: change.before.clone(),
                after: change.after.clone(),
            }),
        }
    }
    out
}

/// Undo an applied run (see the module docs). Refused, with the ids in the way, when an entry
/// the run touched has changed since; then nothing is written.
pub fn undo(root: &Root, run: &str) -> Result<Undone, ReviewError> {
    check_id("run", run)?;
    let _lock = LockGuard::try_acquire(&root.consolidate_lock(), "consolidation")?;
    crate::forget::reconcile_locked(root)?;
    let journal = journal(root)?;
    let mut records: Vec<&JournalRecord> = journal.iter().filter(|r| r.run == run).collect();
    records.sort_by_key(|r| r.seq);
    let record = read_json::<RunRecord>(root, &run_path(root, run))?;
    if records.is_empty() && record.is_none() {
        return Err(ReviewError::NotFound { what: "run", id: run.to_string() });
    }
    if let Some(done) = record.as_ref().and_then(|r| r.undone.as_ref()) {
        return Err(ReviewError::Conflict {
            message: format!("run {run} was undone already, at {}", done.time.to_rfc3339()),
            ids: vec![run.to_string()],
        });
    }
    let ledger = Ledger::load(root)?;
    let changes = net_changes(&records);
    let conflicts: Vec<String> = changes
        .iter()
        .filter(|c| ledger.memory.get(&c.entry).map(Entry::render) != c.after)
        .map(|c| c.entry.clone())
        .collect();
    if !conflicts.is_empty() {
        return Err(ReviewError::Conflict {
            message: format!(
                "entries run {run} touched have changed since ({}); undo refused and nothing was changed. \
                 Undo the later runs first, or edit these entries by hand",
                conflicts.join(", ")
            ),
            ids: conflicts,
        });
    }
    // Byte for byte only with the copy at hand: old records have had theirs dropped.
    let exact = record
        .as_ref()
        .is_some_and(|r| !r.memory_hash_after.is_empty() && r.memory_hash_after == ledger.memory.hash && r.has_copy());
    let before_file = record.as_ref().map(|r| EntryFile::parse(&r.memory_before, MEMORY));
    let mut memory = ledger.memory.clone();
    let (mut restored, mut removed) = (Vec::new(), Vec::new());
    for c in &changes {
        let before = c.before.as_deref().and_then(block_entry);
        match (before, c.after.is_some()) {
            (None, true) => {
                memory.remove(&c.entry);
                removed.push(c.entry.clone());
            }
            (Some(old), true) => {
                if let Some(slot) = memory.get_mut(&c.entry) {
                    *slot = old;
                }
                restored.push(c.entry.clone());
            }
            (Some(old), false) => {
                reinsert(&mut memory, old, before_file.as_ref());
                restored.push(c.entry.clone());
            }
            (None, false) => {}
        }
    }
    let new_text = match (&record, exact) {
        (Some(r), true) => r.memory_before.clone(),
        _ => memory.render(),
    };
    // The undone versions go to history as reverted.
    let today = chrono::Local::now().date_naive();
    let reverted: Vec<Entry> = changes
        .iter()
        .filter_map(|c| {
            let after = block_entry(c.after.as_deref()?)?;
            let mut meta: EntryMeta = after.meta.clone();
            meta.status = Some("reverted".into());
            meta.valid_until = Some(today);
            meta.run = Some(run.to_string());
            meta.superseded_by = c.before.is_some().then(|| c.entry.clone());
            meta.first_seen = meta.first_seen.or(meta.updated);
            Some(Entry::new(meta, &after.content))
        })
        .collect();
    // The run's copies of the versions now current again no longer account for facts either.
    let old_history = std::fs::read_to_string(root.history()).unwrap_or_default();
    let mut history = EntryFile::parse(&old_history, "consolidated/history.md");
    for block in history.entries_mut().filter(|e| {
        e.meta.run.as_deref() == Some(run) && matches!(e.meta.status.as_deref(), Some("replaced" | "merged"))
    }) {
        block.meta.status = Some("restored".into());
        block.touch();
    }
    let new_history = with_blocks(history.render(), &reverted);
    write_atomic(&root.history(), new_history.as_bytes(), Some(&content_hash(&old_history)))?;
    if let Err(e) = write_memory(root, &new_text, &ledger.memory.hash) {
        // Take the history change back: the undo did not happen.
        write_atomic(&root.history(), old_history.as_bytes(), None)?;
        return Err(match e {
            WriteError::Stale { .. } => ReviewError::Stale {
                message: "consolidated/memory.md changed during the undo; nothing was changed".into(),
                ids: Vec::new(),
            },
            other => other.into(),
        });
    }
    // Facts the run consumed that no entry or counted history block names any more.
    let after = Ledger::load(root)?;
    let fates = after.fates();
    let run_facts: BTreeSet<&str> = records.iter().flat_map(|r| r.op.op.facts().iter().map(String::as_str)).collect();
    let facts: Vec<String> =
        run_facts.into_iter().filter(|f| fates.get(f) == Some(&FactFate::Pending)).map(str::to_string).collect();
    let mut state = after.state.clone();
    for fact in &facts {
        state.facts.entry(fact.clone()).or_default().reverted_run = Some(run.to_string());
    }
    // Pending facts may not lie on or before the watermark.
    if let (Some(mark), Some(first)) = (state.watermark, after.pending().iter().map(|f| f.date).min())
        && first <= mark
    {
        state.watermark = first.pred_opt();
    }
    state.file_hashes.insert(MEMORY.into(), content_hash(&new_text));
    state.save(&root.state_json())?;
    let undone = UndoRecord {
        time: Utc::now(),
        exact,
        restored: restored.clone(),
        removed: removed.clone(),
        facts: facts.clone(),
    };
    let mut record = record.unwrap_or_else(|| legacy_record(run, &records));
    record.undone = Some(undone);
    write_json(&run_path(root, run), &record, false)?;
    crate::promote::drop_lines(root, &removed);
    tracing::info!(run = %run, exact, restored = restored.len(), removed = removed.len(), facts = facts.len(), "run undone");
    Ok(Undone { run: run.to_string(), exact, restored, removed, facts })
}

/// A run record for a run applied before run records existed (known only from the journal).
fn legacy_record(run: &str, records: &[&JournalRecord]) -> RunRecord {
    let time = records.first().map_or_else(Utc::now, |r| r.time);
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for r in records {
        *ops.entry(r.op.op.kind().to_string()).or_default() += 1;
    }
    let facts: BTreeSet<String> = records.iter().flat_map(|r| r.op.op.facts().iter().cloned()).collect();
    let entries: BTreeSet<String> = records.iter().flat_map(|r| r.changes.iter().map(|c| c.entry.clone())).collect();
    RunRecord {
        version: FORMAT_VERSION,
        run: run.to_string(),
        started: time,
        finished: time,
        plan: None,
        ops,
        facts: facts.into_iter().collect(),
        entries: entries.into_iter().collect(),
        history_blocks: 0,
        llm: Usage::default(),
        memory_hash_before: String::new(),
        memory_hash_after: String::new(),
        memory_before: String::new(),
        undone: None,
    }
}

/// Put an entry the run removed back where it stood before the run (after the nearest earlier
/// entry that is still there), or at the end.
fn reinsert(memory: &mut EntryFile, entry: Entry, before: Option<&EntryFile>) {
    let index =
        |memory: &EntryFile, id: &str| memory.items.iter().position(|i| matches!(i, Item::Entry(e) if e.id() == id));
    if let Some(before) = before {
        let order: Vec<&str> = before.entries().map(Entry::id).collect();
        if let Some(pos) = order.iter().position(|id| *id == entry.id()) {
            if let Some(at) = order[..pos].iter().rev().find_map(|id| index(memory, id)) {
                memory.items.insert(at + 1, Item::Entry(entry));
                return;
            }
            if let Some(at) = order[pos + 1..].iter().find_map(|id| index(memory, id)) {
                memory.items.insert(at, Item::Entry(entry));
                return;
            }
        }
    }
    memory.push(entry);
}

/// `text` with `blocks` appended, separated by blank lines.
fn with_blocks(mut text: String, blocks: &[Entry]) -> String {
    let appended = crate::files::entries::blocks_after(&text, blocks);
    text.push_str(&appended);
    text
}

// ---------------------------------------------------------------------------------------------
// History chains

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

/// The chain of versions around entry `id`.
pub fn history_chain(root: &Root, id: &str) -> Result<Chain, ReviewError> {
    if id.trim().is_empty() || id.chars().any(char::is_whitespace) {
        return Err(ReviewError::BadInput(format!("{id:?} is not an entry id")));
    }
    let ledger = Ledger::load(root)?;
    let history: Vec<&Entry> = ledger.history.entries().collect();
    let current: Vec<&Entry> = ledger.memory.entries().collect();
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
    let version = |e: &Entry, status: String| Version {
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
        .map(|e| version(e, e.meta.status.clone().unwrap_or_else(|| "history".into())))
        .collect();
    versions.extend(current.iter().filter(|e| ids.contains(e.id())).map(|e| version(e, "current".into())));
    if versions.is_empty() {
        return Err(ReviewError::NotFound { what: "entry", id: id.to_string() });
    }
    Ok(Chain { id: id.to_string(), versions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consolidate::ops::Op;

    fn op(confidence: Option<f64>) -> ProposedOp {
        ProposedOp { confidence, ..ProposedOp::new(Op::Add { facts: vec!["f-1".into()], content: "x".into() }) }
    }

    #[test]
    fn only_ops_below_the_threshold_are_held() {
        let (now, held) = split_low_confidence(vec![op(None), op(Some(0.49)), op(Some(0.5)), op(Some(0.9))], 0.5);
        assert_eq!(now.iter().map(|o| o.confidence).collect::<Vec<_>>(), [None, Some(0.5), Some(0.9)]);
        assert_eq!(held.iter().map(|o| o.confidence).collect::<Vec<_>>(), [Some(0.49)]);
    }

    #[test]
    fn ids_that_cannot_name_a_file_are_bad_input() {
        for id in ["", ".hidden", "../state", "a/b", "r 1", "r\n"] {
            let err = check_id("run", id).unwrap_err();
            assert_eq!(err.http_status(), 400, "{id:?}");
        }
        check_id("run", "r-20261122T042824Z-e7f8-review").unwrap();
    }

    #[test]
    fn error_kinds_map_to_http_statuses() {
        let cases = [
            (ReviewError::NotFound { what: "run", id: "r-1".into() }, 404, "not_found"),
            (ReviewError::BadInput("x".into()), 400, "bad_request"),
            (ReviewError::Conflict { message: "x".into(), ids: vec!["m-1".into()] }, 409, "conflict"),
            (ReviewError::Stale { message: "x".into(), ids: Vec::new() }, 409, "stale"),
            (ReviewError::Corrupt { path: "p".into(), message: "m".into() }, 500, "internal"),
        ];
        for (err, status, code) in cases {
            assert_eq!((err.http_status(), err.code()), (status, code), "{err}");
        }
    }

    #[test]
    fn a_removed_entry_goes_back_after_its_old_predecessor() {
        let block = |id: &str, text: &str| Entry::new(EntryMeta::new(id), text);
        let mut before = EntryFile::parse("# Memory\n\n", MEMORY);
        for (id, text) in [("m-a", "A."), ("m-b", "B."), ("m-c", "C.")] {
            before.push(block(id, text));
        }
        let before = EntryFile::parse(&before.render(), MEMORY);
        let mut now = before.clone();
        now.remove("m-b");
        reinsert(&mut now, block("m-b", "B."), Some(&before));
        assert_eq!(now.render(), before.render());
        now.remove("m-a");
        now.remove("m-b");
        reinsert(&mut now, block("m-b", "B."), Some(&before));
        let ids: Vec<&str> = now.entries().map(Entry::id).collect();
        assert_eq!(ids, ["m-b", "m-c"], "before its old successor when no predecessor is left");
    }

    #[test]
    fn only_the_newest_run_records_keep_their_copy_of_memory() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let time: DateTime<Utc> = "2026-06-01T10:00:00Z".parse().unwrap();
        let write = |n: usize| {
            // Run 3 started from an empty memory.md: its (empty) copy is real.
            let before = if n == 3 { String::new() } else { format!("memory before run {n}\n") };
            let record = RunRecord {
                version: FORMAT_VERSION,
                run: format!("r-2026060{n}T100000Z-abcd"),
                started: time,
                finished: time,
                plan: None,
                ops: BTreeMap::new(),
                facts: Vec::new(),
                entries: Vec::new(),
                history_blocks: 0,
                llm: Usage::default(),
                memory_hash_before: content_hash(&before),
                memory_hash_after: content_hash("after"),
                memory_before: before,
                undone: None,
            };
            write_json(&run_path(&root, &record.run), &record, false).unwrap();
        };
        let copies = || -> Vec<bool> {
            (1..=6)
                .filter_map(|n| {
                    read_json::<RunRecord>(&root, &run_path(&root, &format!("r-2026060{n}T100000Z-abcd"))).unwrap()
                })
                .map(|r| !r.memory_before.is_empty())
                .collect()
        };
        for n in 1..=5 {
            write(n);
        }
        // Runs 1 and 2 lie past run 3's empty copy: the walk goes on through it.
        drop_old_copies(&root, 2).unwrap();
        assert_eq!(copies(), [false, false, false, true, true]);
        write(6);
        drop_old_copies(&root, 2).unwrap();
        assert_eq!(copies(), [false, false, false, false, true, true]);
        let kept = read_json::<RunRecord>(&root, &run_path(&root, "r-20260601T100000Z-abcd")).unwrap().unwrap();
        assert_eq!(kept.memory_hash_after, content_hash("after"), "the hashes stay");
    }
}
