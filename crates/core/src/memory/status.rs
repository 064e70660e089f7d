//! The state of a memory root at a glance: the gate, pending facts, entries, the last run.
//!
//! `memfold status --json` prints a [`Status`] and `GET /status` answers with one (plus what
//! the daemon adds about its own passes), so both read the same fields from the same files.

use chrono::{DateTime, Utc};

use crate::memory::views::{CurationStats, EmbedderStatus, Status};
use crate::planning::consolidate::gate::{self, GateInput};
use crate::planning::consolidate::pass;
use crate::planning::run::records;
use crate::planning::stale;
use memfold_store::Root;
use memfold_store::caches::{DecayCounts, RecordSummaries, RecordSummary, StatusCounts};
use memfold_store::config::Config;
use memfold_store::entries::EntryFile;
use memfold_store::ledger::{Ledger, LedgerError};
use memfold_store::runs;
use memfold_store::sources::Sources;
use memfold_store::state::State;
use memfold_store::sys::clock::Clock;
use memfold_store::sys::lock;
use memfold_store::uses::Uses;

/// The counts of a full read, with the record of the files read.
fn counts_of(root: &Root, ledger: &Ledger, seen: Sources, clock: Clock) -> StatusCounts {
    let pending = ledger.pending();
    StatusCounts {
        seen,
        pending: pending.len(),
        entries: ledger.memory.entries().count(),
        problems: ledger.problems.len(),
        candidates: pass::candidates_among(ledger, &pending).map(|f| f.id.clone()).collect(),
        related: ledger.memory.entries().filter(|e| !e.meta.links().is_empty()).count(),
        named: crate::planning::about::named_entries(&ledger.memory),
        decay: Some(decay_counts(root, &ledger.memory, clock)),
    }
}

/// Decay's view of `memory` (see [`DecayCounts`]): each entry's last use, as a sweep reads it
/// (the use table with the log folded in, the day it was written or changed).
fn decay_counts(root: &Root, memory: &EntryFile, clock: Clock) -> DecayCounts {
    let seen = DecayCounts::look(root);
    let uses = Uses::current(root);
    let exempt = stale::Exempt { ids: memfold_store::promoted::entry_ids(root), ..stale::Exempt::default() };
    let mut quiet = std::collections::BTreeMap::new();
    for entry in memory.entries().filter(|e| !e.meta.pinned && !exempt.ids.contains(e.id())) {
        if let Some(last) = stale::last_use(entry, &uses, &exempt, |t| clock.day_of(t)) {
            *quiet.entry(last.day()).or_default() += 1;
        }
    }
    DecayCounts { seen, quiet }
}

/// The derived counts with decay's view brought up to date: worked out again (from
/// `memory.md`) when the use table or `MEMORY.md` changed since.
fn with_decay(root: &Root, mut counts: StatusCounts, clock: Clock) -> Result<StatusCounts, LedgerError> {
    let now = DecayCounts::look(root);
    if counts.decay.as_ref().is_some_and(|d| d.seen == now) {
        return Ok(counts);
    }
    let memory = memfold_store::ledger::read_entries(root, &root.memory())?;
    counts.decay = Some(decay_counts(root, &memory, clock));
    if let Err(e) = counts.save(root) {
        tracing::debug!(error = %e, "could not cache the status counts");
    }
    Ok(counts)
}

/// The derived counts: from the cache if its record still describes the files (looked at
/// before any read, as the index's record is), else from a full read, which is then cached.
fn derived(root: &Root, clock: Clock) -> Result<StatusCounts, LedgerError> {
    let cached = StatusCounts::load(root);
    let look_error = |source| LedgerError::Read { path: root.dir().display().to_string(), source };
    let seen = Sources::look(root, cached.as_ref().map(|c| &c.seen)).map_err(look_error)?;
    if let Some(cached) = cached.filter(|c| c.seen.changed(&seen).is_empty()) {
        return Ok(cached);
    }
    let counts = counts_of(root, &Ledger::load(root)?, seen, clock);
    if let Err(e) = counts.save(root) {
        tracing::debug!(error = %e, "could not cache the status counts");
    }
    Ok(counts)
}

/// Cache the counts of `ledger`, read after the files were looked at as `seen`, and bring the
/// record summaries up to date (a pass's plan is read here once, not by the next `status`).
/// Blocking.
pub fn cache_counts(
    root: &Root,
    ledger: &Ledger,
    seen: Sources,
    clock: Clock,
) -> Result<(), memfold_store::atomic::WriteError> {
    counts_of(root, ledger, seen, clock).save(root)?;
    summaries(root);
    Ok(())
}

/// Read the root and evaluate the gate as an unforced pass would at `now`. Blocking (reads files).
pub fn status(root: &Root, config: &Config, now: DateTime<Utc>) -> Result<Status, LedgerError> {
    status_of(root, config, now, &summaries(root))
}

/// [`status`] with the curation totals, from one look at the plan and run records.
pub fn status_with_curation(root: &Root, config: &Config, now: DateTime<Utc>) -> Result<Status, LedgerError> {
    let summaries = summaries(root);
    let mut status = status_of(root, config, now, &summaries)?;
    status.curation = Some(curation(&summaries));
    Ok(status)
}

fn status_of(
    root: &Root,
    config: &Config,
    now: DateTime<Utc>,
    summaries: &RecordSummaries,
) -> Result<Status, LedgerError> {
    let derived = with_decay(root, derived(root, config.clock())?, config.clock())?;
    let state = State::load(&root.state_json())?;
    let pending = derived.pending;
    // The gate counts what an unforced pass would take up, so it agrees with the pass.
    let waiting: Vec<&RecordSummary> = summaries.plans.values().filter(|p| p.pending).collect();
    let under_review: std::collections::HashSet<String> =
        waiting.iter().flat_map(|p| p.facts.iter().cloned()).collect();
    let eligible = derived
        .candidates
        .iter()
        .filter(|id| pass::admitted(id, &state, &under_review, &config.consolidation, false))
        .count();
    let holder = lock::holder(&root.consolidate_lock());
    let gate = gate::evaluate(
        &config.consolidation,
        &GateInput {
            lock_holder: holder.as_deref(),
            last_run: state.last_run.as_ref().map(|r| r.finished),
            now,
            pending: eligible,
            force: false,
        },
    );
    let last_sweep = last_sweep(root);
    let every = config.consolidation.sweep_interval_hours;
    let sweep_due = every > 0.0
        && derived.entries > 0
        && holder.is_none()
        && last_sweep.is_none_or(|t| (now - t).num_seconds() as f64 >= every * 3600.0);
    Ok(Status {
        gate,
        pending_facts: pending,
        held_facts: pending - eligible,
        plans_waiting: waiting.len(),
        proposals_waiting: waiting.iter().map(|p| p.ops).sum(),
        entries: derived.entries,
        last_run: state.last_run.clone(),
        watermark: state.watermark,
        problems: derived.problems,
        embedder: {
            let (chosen, why) = memfold_models::embed::chosen(&config.embedding);
            EmbedderStatus { name: chosen.name(), why }
        },
        memory_tokens: std::fs::metadata(root.memory()).map_or(0, |m| m.len() as usize).div_ceil(4),
        last_sweep,
        sweep_due,
        sync: root.git_dir().exists().then(|| crate::memory::sync::load_state(root)),
        curation: None,
        related_entries: derived.related,
        named_entries: derived.named,
        stale_entries: match config.decay.retire_after_days {
            0 => 0,
            days => derived
                .decay
                .as_ref()
                .map_or(0, |d| d.before(config.clock().day_of(now) - chrono::Duration::days(i64::from(days)))),
        },
    })
}

/// When the last sweep finished: when it wrote `.memfold/sweep.json`.
pub fn last_sweep(root: &Root) -> Option<DateTime<Utc>> {
    let modified = std::fs::metadata(root.dir().join(crate::planning::sweep::STATE)).ok()?.modified().ok()?;
    Some(modified.into())
}

/// The summaries of every plan and run record (see [`RecordSummaries`]): each file whose
/// size or modification time differs from its cached summary is read again, and the cache is
/// saved when anything changed.
fn summaries(root: &Root) -> RecordSummaries {
    let cached = RecordSummaries::load(root);
    let mut fresh = RecordSummaries::default();
    for (files, plans) in [(runs::plans_listed(root), true), (runs::runs_listed(root), false)] {
        let (old, new) = if plans { (&cached.plans, &mut fresh.plans) } else { (&cached.runs, &mut fresh.runs) };
        for runs::Listed { name, path, size, modified_ns } in files {
            if let Some(known) = old.get(&name).filter(|k| k.size == size && k.modified_ns == modified_ns) {
                new.insert(name, known.clone());
                continue;
            }
            let summary = if plans { plan_summary(root, &path) } else { run_summary(root, &path) };
            if let Some(summary) = summary {
                new.insert(name, RecordSummary { size, modified_ns, ..summary });
            }
        }
    }
    if fresh != cached
        && let Err(e) = fresh.save(root)
    {
        tracing::debug!(error = %e, "could not cache the record summaries");
    }
    fresh
}

fn plan_summary(root: &Root, path: &std::path::Path) -> Option<RecordSummary> {
    let plan = match records::read_json::<records::PlanHead>(root, path) {
        Ok(plan) => plan?,
        Err(e) => {
            tracing::warn!(error = %e, "plan file skipped");
            return None;
        }
    };
    let ops = plan.journal.len();
    let pending = plan.status == records::PlanStatus::Pending;
    Some(RecordSummary {
        pending,
        ops,
        facts: if pending { plan.facts.iter().map(|f| f.id.clone()).collect() } else { Vec::new() },
        decider: Some(plan.decider()),
        rejected: if plan.status == records::PlanStatus::Rejected { ops } else { 0 },
        expired: if plan.status == records::PlanStatus::Expired { ops } else { 0 },
        ..RecordSummary::default()
    })
}

fn run_summary(root: &Root, path: &std::path::Path) -> Option<RecordSummary> {
    let run = records::read_json::<records::RunHead>(root, path).ok()??;
    let ops: usize = run.ops.values().sum();
    let one_by_one: usize = run.undone_ops.iter().map(|u| u.ops.len()).sum();
    let decider = run.decider.filter(|_| run.plan.is_some());
    Some(RecordSummary {
        ops,
        undone: if run.undone.is_some() { ops } else { one_by_one },
        saved: if run.undone.is_none() { run.size.map_or(0, |s| s.tokens_saved_by_merges) } else { 0 },
        applied: if decider.is_some() { ops } else { 0 },
        decider,
        ..RecordSummary::default()
    })
}

/// What curation did over the life of a root: totals over every run record and plan.
fn curation(summaries: &RecordSummaries) -> CurationStats {
    let mut stats = CurationStats::default();
    for run in summaries.runs.values() {
        stats.runs += 1;
        stats.ops_undone += run.undone;
        stats.tokens_saved_by_merges += run.saved;
        if let Some(decider) = run.decider {
            stats.decider(decider).proposals_applied += run.applied;
        }
    }
    for plan in summaries.plans.values() {
        let decider = stats.decider(plan.decider.unwrap_or_default());
        decider.proposals_rejected += plan.rejected;
        decider.proposals_expired += plan.expired;
    }
    for d in &mut stats.deciders {
        let decided = d.proposals_applied + d.proposals_rejected;
        d.rejected_share = (decided > 0).then(|| d.proposals_rejected as f64 / decided as f64);
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use memfold_store::archive::{self, NewFact};
    use memfold_store::entries::{Entry, EntryFile, EntryMeta};
    use memfold_store::state::FactProgress;

    fn add(root: &Root, text: &str) -> String {
        let date: chrono::NaiveDate = "2026-11-20".parse().unwrap();
        let fact = NewFact { text: text.into(), date: Some(date), source: None };
        archive::append(root, &[fact], date.and_hms_opt(9, 0, 0).unwrap()).unwrap().remove(0).id
    }

    /// The fields a full read gives, next to the same from `status` (cached or not).
    fn fields(s: &Status) -> (usize, usize, usize, usize, usize) {
        (s.pending_facts, s.held_facts, s.entries, s.problems, s.plans_waiting)
    }

    fn fresh(root: &Root, config: &Config) -> Status {
        let _ = std::fs::remove_file(StatusCounts::path(root));
        status(root, config, Utc::now()).unwrap()
    }

    /// `status` from the cache says what a full read says; a change to any source file is
    /// seen at once, and what is read anew every time (state.json) is never stale.
    #[test]
    fn cached_counts_agree_with_a_full_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let config = Config::default();
        let walked = add(&root, "Walked the dog.");
        add(&root, "Bought a bicycle.");
        let mut file = EntryFile::default();
        file.push(Entry::new(EntryMeta { sources: vec![walked], ..EntryMeta::new("m-dog") }, "Walks the dog."));
        std::fs::write(root.memory(), file.render()).unwrap();

        let first = status(&root, &config, Utc::now()).unwrap();
        assert!(StatusCounts::path(&root).exists());
        assert_eq!(fields(&first), (1, 0, 1, 0, 0));
        assert_eq!(fields(&status(&root, &config, Utc::now()).unwrap()), fields(&first), "from the cache");

        let tea = add(&root, "Drinks green tea.");
        let after = status(&root, &config, Utc::now()).unwrap();
        assert_eq!(fields(&after), (2, 0, 1, 0, 0));
        assert_eq!(fields(&after), fields(&fresh(&root, &config)));

        // Held back by an undo: read from state.json every time, the cache still valid.
        let mut state = State::load(&root.state_json()).unwrap();
        state.facts.insert(tea, FactProgress { reverted_run: Some("r-1".into()), ..FactProgress::default() });
        std::fs::write(root.state_json(), state.to_json()).unwrap();
        let held = status(&root, &config, Utc::now()).unwrap();
        assert_eq!(fields(&held), (2, 1, 1, 0, 0));
        assert_eq!(fields(&held), fields(&fresh(&root, &config)));

        // A misnamed archive file is a problem as soon as it appears.
        std::fs::write(root.archive_dir().join("notes.md"), "- a\n").unwrap();
        assert_eq!(status(&root, &config, Utc::now()).unwrap().problems, 1);
    }
}
