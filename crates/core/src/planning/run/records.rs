//! What consolidation leaves under `.memfold/` besides the journal: run records and stored plans.
//!
//! `.memfold/runs/<run>.json` describes one applied run (what it did, what it cost, and the
//! text of `memory.md` before it, for a byte-for-byte undo); `.memfold/plans/<id>.json` holds a
//! plan waiting for `memfold apply` or `reject`. Both are written only through
//! [`memfold_store::commit`], as part of the change they belong to; this module defines their format,
//! reads them, and renders them as the `(path, text)` pairs a [`memfold_store::commit::Change`] carries.

use memfold_store::caches::DeciderKind;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::plan::{JournalRecord, Plan};
use crate::error::Error;
use memfold_models::llm::Usage;
use memfold_store::archive::Fact;
pub use memfold_store::runs::{plan_path, run_path};
use memfold_store::runs::{plan_rel, run_rel};
use memfold_store::state::read_jsonl;
use memfold_store::{Root, content_hash};

/// Version of the plan and run files this build writes.
pub const FORMAT_VERSION: u32 = 1;

/// Run records that keep the text of `memory.md` from before their run.
pub const RUNS_WITH_COPIES: usize = 20;

/// Whether a stored plan still waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanStatus {
    Pending,
    Rejected,
    /// Left undecided for `review.expire_days`: its facts are decided again by the next pass.
    Expired,
    /// Applied (only in listings: an applied plan's file is removed, its run record stays).
    Applied,
}

impl PlanStatus {
    /// The name in plan files and `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::Rejected => "rejected",
            PlanStatus::Expired => "expired",
            PlanStatus::Applied => "applied",
        }
    }
}

/// Why a plan waits for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum PlanReason {
    /// `consolidation.mode = "review"`: the whole pass.
    Review,
    /// Ops an automatic pass with an LLM held back below `review_below_confidence`.
    LowConfidence,
    /// The ops the offline decider proposes instead of applying (a likely duplicate, a
    /// negation, a correction, a new value): rejecting one returns its facts to the next pass,
    /// which decides them again without the rejected pairs.
    Proposal,
    /// A rebuild in review mode: it sets every entry aside, so it applies only to the
    /// `memory.md` it was made for, and rewrites it whole.
    Rebuild,
    /// What a sweep of the current entries found (duplicates, contradictions, superseded
    /// values): never applied on its own.
    Sweep,
    /// Entries unused for `decay.retire_after_days`, proposed for retirement by a sweep:
    /// never applied on its own unless `consolidation.auto_apply` names STALE.
    Stale,
    /// An entry changed on two machines between syncs: the later version stays current, the
    /// plan brings back the other.
    Sync,
    /// A reason this build does not know (a newer memfold's); kept as is.
    Other(String),
}

impl PlanReason {
    pub fn as_str(&self) -> &str {
        match self {
            PlanReason::Review => "review",
            PlanReason::LowConfidence => "low-confidence",
            PlanReason::Proposal => "proposal",
            PlanReason::Rebuild => "rebuild",
            PlanReason::Sweep => "sweep",
            PlanReason::Stale => "stale",
            PlanReason::Sync => "sync",
            PlanReason::Other(s) => s,
        }
    }
}

impl From<String> for PlanReason {
    fn from(s: String) -> PlanReason {
        match s.as_str() {
            "review" => PlanReason::Review,
            "low-confidence" => PlanReason::LowConfidence,
            "proposal" => PlanReason::Proposal,
            "rebuild" => PlanReason::Rebuild,
            "sweep" => PlanReason::Sweep,
            "stale" => PlanReason::Stale,
            "sync" => PlanReason::Sync,
            _ => PlanReason::Other(s),
        }
    }
}

impl From<PlanReason> for String {
    fn from(r: PlanReason) -> String {
        r.as_str().to_string()
    }
}

impl std::fmt::Display for PlanReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `.memfold/plans/<id>.json`: a plan waiting for `apply` or `reject`. Applied plans are
/// removed (their run record takes over); rejected ones are kept with `status: rejected`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredPlan {
    pub version: u32,
    /// Also the id of the run that applying the plan creates.
    pub id: String,
    pub status: PlanStatus,
    pub reason: PlanReason,
    /// When the plan was made; the planning clock, so a rebase renders the same blocks.
    pub created: DateTime<Utc>,
    /// The day the plan was made on (the planner's "today").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<chrono::NaiveDate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<DateTime<Utc>>,
    /// When it expired (`review.expire_days`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired: Option<DateTime<Utc>>,
    /// The pass that made the plan (for held low-confidence ops, the run that applied the rest).
    pub pass: String,
    /// Hash of `memory.md` the plan was made against.
    pub memory_hash_before: String,
    /// `memory.md` as applying the plan writes it. Stored only for a rebuild, whose entries
    /// cannot be replayed from a journal; any other plan is replayed from its journal on apply,
    /// change for change (`review::plans`), and its file does not carry the whole text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
    /// What each fact of the plan was weighed against: the entries ranked for it that its
    /// decision call showed, so a person reviewing the plan sees those the decider left alone.
    /// Absent in plans stored before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<SeenFact>,
    /// Why it was rejected, as the person said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A fact of a stored plan and the entries ranked for it, best first, as its call showed them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeenFact {
    pub fact: String,
    pub entries: Vec<SeenEntry>,
}

/// An entry as a decision call was shown it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeenEntry {
    pub id: String,
    pub content: String,
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
    /// Why, as the person who undid it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `memory.md` around a run: entries and tokens (characters / 4, the usual estimate) before and
/// after, and the tokens of the entries its REMOVEs folded away (what merging saved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySize {
    pub entries_before: usize,
    pub entries_after: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub tokens_saved_by_merges: usize,
}

/// Estimated tokens of a text.
pub fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Entries in a rendered `memory.md` (the headers, without a parse).
fn entry_count(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("<!--m ")).count()
}

impl MemorySize {
    /// Of a plan: its text before and after, and the content of the entries it removed.
    pub fn of(plan: &Plan) -> MemorySize {
        let saved = plan
            .journal
            .iter()
            .filter(|r| matches!(r.op.op, super::ops::Op::Remove { .. }))
            .flat_map(|r| r.changes.iter().filter(|c| c.after.is_none()))
            .filter_map(|c| c.before.as_deref())
            .map(|block| tokens(block.split_once("-->").map_or(block, |(_, content)| content).trim()))
            .sum();
        MemorySize {
            entries_before: entry_count(&plan.memory_before),
            entries_after: entry_count(&plan.memory_after),
            tokens_before: tokens(&plan.memory_before),
            tokens_after: tokens(&plan.memory_after),
            tokens_saved_by_merges: saved,
        }
    }
}

/// An undo of some ops of a run (`memfold undo RUN --op N`), kept in the run record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpsUndo {
    /// The journal `seq` of each op undone.
    pub ops: Vec<usize>,
    #[serde(flatten)]
    pub undo: UndoRecord,
}

/// `.memfold/runs/<run>.json`: one applied run, written in the same commit as its journal lines.
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
    /// Every LLM call of the run: decisions, re-asks and the promotion of `MEMORY.md` after it.
    #[serde(default)]
    pub llm: Usage,
    /// How the run's facts were packed into decision calls, and the coverage of their ranked
    /// entries (runs of a pass; absent for runs recorded before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packing: Option<crate::planning::consolidate::pack::Packing>,
    /// Hashes and text of `memory.md` around the run (empty when unknown).
    #[serde(default)]
    pub memory_hash_before: String,
    #[serde(default)]
    pub memory_hash_after: String,
    #[serde(default)]
    pub memory_before: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone: Option<UndoRecord>,
    /// Undos of single ops or op groups, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undone_ops: Vec<OpsUndo>,
    /// The verb of a run a person asked for by name (`merge`, `supersede`); None for passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Why the plan this run applied was held for review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_reason: Option<PlanReason>,
    /// Why, as the person who asked for the run (or applied its plan) said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Who decided the plan this run applied (`llm`, `offline`), for the share of proposals
    /// people reject per decider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<DeciderKind>,
    /// `memory.md` before and after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<MemorySize>,
}

/// A run record as the run listing reads it, without its copy of `memory.md`.
#[derive(Debug, Deserialize)]
pub struct RunHead {
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    #[serde(default)]
    pub plan: Option<String>,
    pub facts: Vec<String>,
    #[serde(default)]
    pub llm: Usage,
    #[serde(default)]
    pub undone: Option<UndoRecord>,
    #[serde(default)]
    pub undone_ops: Vec<OpsUndo>,
    #[serde(default)]
    pub verb: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub decider: Option<DeciderKind>,
    #[serde(default)]
    pub size: Option<MemorySize>,
    #[serde(default)]
    pub ops: BTreeMap<String, usize>,
}

impl RunRecord {
    /// The record of an applied plan.
    pub fn of(plan: &Plan, started: DateTime<Utc>, finished: DateTime<Utc>) -> RunRecord {
        let mut ops: BTreeMap<String, usize> = BTreeMap::new();
        for r in &plan.journal {
            *ops.entry(r.op.op.kind().to_string()).or_default() += 1;
        }
        RunRecord {
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
            packing: plan.packing.clone(),
            memory_hash_before: plan.memory_hash_before.clone(),
            memory_hash_after: content_hash(&plan.memory_after),
            memory_before: plan.memory_before.clone(),
            undone: None,
            undone_ops: Vec::new(),
            verb: plan.verb.clone(),
            plan_reason: plan.plan_reason.clone(),
            note: plan.note.clone(),
            decider: plan.decider,
            size: Some(MemorySize::of(plan)),
        }
    }

    /// A run record for a run applied before run records existed (known only from the journal).
    pub fn legacy(run: &str, records: &[&JournalRecord]) -> RunRecord {
        let time = records.first().map_or_else(memfold_store::sys::clock::now, |r| r.time);
        let mut ops: BTreeMap<String, usize> = BTreeMap::new();
        for r in records {
            *ops.entry(r.op.op.kind().to_string()).or_default() += 1;
        }
        let facts: BTreeSet<String> = records.iter().flat_map(|r| r.op.op.facts().iter().cloned()).collect();
        let entries: BTreeSet<String> =
            records.iter().flat_map(|r| r.changes.iter().map(|c| c.entry.clone())).collect();
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
            packing: None,
            memory_hash_before: String::new(),
            memory_hash_after: String::new(),
            memory_before: String::new(),
            undone: None,
            undone_ops: Vec::new(),
            verb: None,
            plan_reason: None,
            note: None,
            decider: None,
            size: None,
        }
    }

    /// Whether `memory_before` is the text the run started from: false once the copy was
    /// dropped (see [`RUNS_WITH_COPIES`]) and for records that never had one. A run on an
    /// empty file has an empty copy that is still true.
    pub fn has_copy(&self) -> bool {
        content_hash(&self.memory_before) == self.memory_hash_before
    }

    /// The record as a file of a [`memfold_store::commit::Change`].
    pub fn file(&self) -> (String, Option<String>) {
        (run_rel(&self.run), Some(json_text(self)))
    }
}

impl StoredPlan {
    /// The plan as a file of a [`memfold_store::commit::Change`]: without `memory_after` unless
    /// it is a rebuild's (a plan at 100k entries would otherwise hold the whole `memory.md`).
    pub fn file(&self) -> (String, Option<String>) {
        let text = match self.reason == PlanReason::Rebuild || self.memory_after.is_empty() {
            true => json_text(self),
            false => json_text(&StoredPlan { memory_after: String::new(), ..self.clone() }),
        };
        (plan_rel(&self.id), Some(text))
    }
}

/// A plan file's removal, for a [`memfold_store::commit::Change`].
pub fn plan_removal(id: &str) -> (String, Option<String>) {
    (plan_rel(id), None)
}

fn json_text(value: &impl Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Plan and run ids name files: letters, digits, `-`, `_`, `.`, not starting with a dot.
pub fn check_id(what: &str, id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(()) } else { Err(Error::BadInput(format!("{id:?} is not a valid {what} id"))) }
}

/// The record at `path` read as `T` (see [`memfold_store::runs::read_json`]).
pub fn read_json<T: serde::de::DeserializeOwned>(root: &Root, path: &Path) -> Result<Option<T>, Error> {
    memfold_store::runs::read_json(root, path).map_err(|e| match e {
        memfold_store::runs::RecordError::Read { path, source } => Error::Read { path, source },
        memfold_store::runs::RecordError::Corrupt { path, message } => Error::Corrupt { path, message },
    })
}

/// The run record of `run`, if there is one.
pub fn load_run(root: &Root, run: &str) -> Result<Option<RunRecord>, Error> {
    read_json(root, &run_path(root, run))
}

/// A stored plan by id.
pub fn load_plan(root: &Root, id: &str) -> Result<StoredPlan, Error> {
    check_id("plan", id)?;
    read_json(root, &plan_path(root, id))?.ok_or_else(|| Error::not_found("plan", id))
}

/// A stored plan as listings read it: everything but the copies only applying it needs (its
/// `memory.md` after, the history blocks, what its facts were weighed against). A plan holds a
/// whole `memory.md`, so reading every plan whole to list them, count them or find their
/// facts costs a parse of memory per plan.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanHead {
    pub id: String,
    pub status: PlanStatus,
    pub reason: PlanReason,
    pub created: DateTime<Utc>,
    #[serde(default)]
    pub rejected: Option<DateTime<Utc>>,
    #[serde(default)]
    pub expired: Option<DateTime<Utc>>,
    #[serde(default)]
    pub note: Option<String>,
    pub pass: String,
    pub memory_hash_before: String,
    pub diff: String,
    pub journal: Vec<JournalRecord>,
    pub facts: Vec<Fact>,
    pub touched: BTreeSet<String>,
    #[serde(default)]
    pub llm: Usage,
}

impl PlanHead {
    /// Who decided the plan: the LLM when deciding it called one.
    pub fn decider(&self) -> DeciderKind {
        if self.llm.calls > 0 { DeciderKind::Llm } else { DeciderKind::Offline }
    }
}

impl StoredPlan {
    /// What a listing of plans shows of this one.
    pub fn head(&self) -> PlanHead {
        PlanHead {
            id: self.id.clone(),
            status: self.status,
            reason: self.reason.clone(),
            created: self.created,
            rejected: self.rejected,
            expired: self.expired,
            note: self.note.clone(),
            pass: self.pass.clone(),
            memory_hash_before: self.memory_hash_before.clone(),
            diff: self.diff.clone(),
            journal: self.journal.clone(),
            facts: self.facts.clone(),
            touched: self.touched.clone(),
            llm: self.llm,
        }
    }
}

/// Every readable plan file as a [`PlanHead`], oldest first; unreadable ones are logged and
/// skipped.
pub fn plan_heads(root: &Root) -> Vec<PlanHead> {
    let mut plans: Vec<PlanHead> = memfold_store::runs::plan_files(root)
        .into_iter()
        .filter_map(|path| match read_json::<PlanHead>(root, &path) {
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

/// What the stored plans tell a pass, from one read of `.memfold/plans/`.
#[derive(Debug, Default)]
pub struct PlanMarks {
    /// Fact ids named by pending plans: passes leave them out until the plan is applied or
    /// rejected.
    pub under_review: HashSet<String>,
    /// (fact, entry) pairs of the ops of rejected plans: a proposal a person turned down is
    /// not made again for the same pair.
    pub rejected: HashSet<(String, String)>,
}

/// [`PlanMarks`] of the root.
pub fn plan_marks(root: &Root) -> PlanMarks {
    let plans = plan_heads(root);
    let pending: Vec<PlanHead> = plans.iter().filter(|p| p.status == PlanStatus::Pending).cloned().collect();
    PlanMarks { under_review: under_review(&pending), rejected: rejected_pairs_of(plans) }
}

/// The stored plans waiting for `apply` or `reject`.
pub fn pending_plans(root: &Root) -> Vec<PlanHead> {
    plan_heads(root).into_iter().filter(|p| p.status == PlanStatus::Pending).collect()
}

/// The facts of `plans`.
pub fn under_review(plans: &[PlanHead]) -> HashSet<String> {
    plans.iter().flat_map(|p| p.facts.iter().map(|f| f.id.clone())).collect()
}

/// (fact, entry) pairs of the ops of rejected plans: a proposal a person turned down is not
/// made again for the same pair.
fn rejected_pairs_of(plans: Vec<PlanHead>) -> HashSet<(String, String)> {
    plans
        .into_iter()
        .filter(|p| p.status == PlanStatus::Rejected)
        .flat_map(|p| p.journal)
        .filter_map(|r| r.op.op.target().map(|t| (r.op.op.facts().to_vec(), t.to_string())))
        .flat_map(|(facts, target)| facts.into_iter().map(move |f| (f, target.clone())))
        .collect()
}

/// Every record of `.memfold/journal.jsonl`; unreadable lines are logged and skipped.
pub fn journal(root: &Root) -> Result<Vec<JournalRecord>, Error> {
    let (records, problems) = read_jsonl::<JournalRecord>(&root.journal(), ".memfold/journal.jsonl")?;
    for p in problems {
        tracing::warn!(problem = %p, "journal record skipped");
    }
    Ok(records)
}

/// A journal record as the run listing reads it: which run, which op, which facts and
/// entries, without the entries' blocks before and after (most of the journal's bytes).
#[derive(Debug, Deserialize)]
pub struct JournalLine {
    pub run: String,
    pub time: DateTime<Utc>,
    /// The op's kind (`ADD`, `REPLACE`, `REMOVE`, `DUPLICATE`).
    pub op: String,
    #[serde(default)]
    pub facts: Vec<String>,
    #[serde(default)]
    pub changes: Vec<ChangedEntry>,
}

/// The entry a journal record changes.
#[derive(Debug, Deserialize)]
pub struct ChangedEntry {
    pub entry: String,
}

/// Every record of `.memfold/journal.jsonl` as a [`JournalLine`]; unreadable lines are logged
/// and skipped.
pub fn journal_lines(root: &Root) -> Result<Vec<JournalLine>, Error> {
    let (records, problems) = read_jsonl::<JournalLine>(&root.journal(), ".memfold/journal.jsonl")?;
    for p in problems {
        tracing::warn!(problem = %p, "journal record skipped");
    }
    Ok(records)
}

/// The run records that lose their copy of `memory.md` once `new_run` is recorded, so only the
/// newest `keep` keep theirs (run ids begin with their start time, so file names sort by age).
/// Going from new to old, it stops at the first record already without a copy: the ones before
/// it were emptied by earlier runs. (An empty copy, from a run on an empty file, is a copy: it
/// does not stop the walk.)
pub fn copies_to_drop(root: &Root, new_run: &str, keep: usize) -> Vec<(String, Option<String>)> {
    let mut names = memfold_store::runs::run_names(root);
    if !names.iter().any(|n| n == new_run) {
        names.push(new_run.to_string());
    }
    names.sort();
    let old = names.len().saturating_sub(keep);
    let mut out = Vec::new();
    for name in names[..old].iter().rev() {
        // A record that does not parse is left as it is; `runs` reports it.
        let Ok(Some(mut record)) = load_run(root, name) else { continue };
        if !record.has_copy() {
            break;
        }
        if !record.memory_before.is_empty() {
            record.memory_before.clear();
            out.push(record.file());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_status_reads_as_it_is_stored() {
        for status in [PlanStatus::Pending, PlanStatus::Rejected] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }

    #[test]
    fn ids_that_cannot_name_a_file_are_bad_input() {
        for id in ["", ".hidden", "../state", "a/b", "r 1", "r\n"] {
            let err = check_id("run", id).unwrap_err();
            assert_eq!(err.kind(), crate::error::Kind::BadInput, "{id:?}");
        }
        check_id("run", "r-20261122T042824Z-e7f8-review").unwrap();
    }

    #[test]
    fn only_the_newest_run_records_keep_their_copy_of_memory() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::create_dir_all(root.runs_dir()).unwrap();
        let time: DateTime<Utc> = "2026-06-01T10:00:00Z".parse().unwrap();
        let write = |n: usize| {
            // Run 3 started from an empty memory.md: its (empty) copy is real.
            let before = if n == 3 { String::new() } else { format!("memory before run {n}\n") };
            let record = RunRecord {
                memory_hash_before: content_hash(&before),
                memory_hash_after: content_hash("after"),
                memory_before: before,
                started: time,
                finished: time,
                ..RunRecord::legacy(&format!("r-2026060{n}T100000Z-abcd"), &[])
            };
            let (path, text) = record.file();
            std::fs::write(root.dir().join(path), text.unwrap()).unwrap();
        };
        let apply = |files: Vec<(String, Option<String>)>| {
            for (path, text) in files {
                std::fs::write(root.dir().join(path), text.unwrap()).unwrap();
            }
        };
        let copies = || -> Vec<bool> {
            (1..=6)
                .filter_map(|n| load_run(&root, &format!("r-2026060{n}T100000Z-abcd")).unwrap())
                .map(|r| !r.memory_before.is_empty())
                .collect()
        };
        for n in 1..=5 {
            write(n);
        }
        // Runs 1 and 2 lie past run 3's empty copy: the walk goes on through it.
        apply(copies_to_drop(&root, "r-20260605T100000Z-abcd", 2));
        assert_eq!(copies(), [false, false, false, true, true]);
        write(6);
        apply(copies_to_drop(&root, "r-20260606T100000Z-abcd", 2));
        assert_eq!(copies(), [false, false, false, false, true, true]);
        let kept = load_run(&root, "r-20260601T100000Z-abcd").unwrap().unwrap();
        assert_eq!(kept.memory_hash_after, content_hash("after"), "the hashes stay");
    }
}
