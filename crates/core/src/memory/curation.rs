//! Curation: forget, pin, hand deletions, undo, and applying or rejecting a stored plan.

use super::views::{AppliedPlan, Forgotten, RejectedPlan, Undone};
use super::{Memory, Rewritten, blocking};
use crate::error::Error;
use crate::planning::curate::{self, Curated, Successor, TextFrom};
use crate::planning::forget::{self, Promoted};
use crate::planning::review;
use crate::planning::run::apply::{self, Outcome};
use crate::planning::run::records::{self, PlanReason};
use memfold_models::llm::Usage;
use memfold_models::llm::merge::Merging;
use memfold_store::commit::Change;

impl Memory {
    /// Forget an entry (to history as deleted, tombstoned with its facts) or a pending fact.
    pub async fn forget(&self, id: &str, reason: Option<&str>) -> Result<Forgotten, Error> {
        let (id, reason) = (id.to_string(), self.gate("reason", reason)?);
        let (done, rewrote, lock) = self
            .write(move |me, ledger| {
                let promoted = me.promoted();
                let now = me.inner.clock.now();
                forget::plan_forget(
                    ledger,
                    Promoted { text: &promoted },
                    &id,
                    reason.as_deref(),
                    now,
                    me.inner.clock.day_of(now),
                )
            })
            .await?;
        drop(lock);
        if rewrote {
            self.tell(Rewritten::Promoted);
            self.tell(Rewritten::Memory);
        }
        self.refresh_after_change().await;
        Ok(done)
    }

    /// Pin or unpin an entry: a pinned entry is never replaced or removed by consolidation.
    pub async fn pin(&self, id: &str, pinned: bool) -> Result<(), Error> {
        let id = id.to_string();
        let (_, rewrote, lock) = self.write(move |_, ledger| Ok((forget::plan_pin(ledger, &id, pinned)?, ()))).await?;
        drop(lock);
        if rewrote {
            self.tell(Rewritten::Memory);
            self.refresh_after_change().await;
        }
        Ok(())
    }

    /// Record entries a person deleted from `memory.md` by hand; skipped (nothing returned)
    /// while another writer holds the lock, which records them itself.
    pub async fn reconcile(&self) -> Result<Vec<String>, Error> {
        let me = self.clone();
        let gone = blocking(move || match me.lock() {
            Ok(lock) => me.reconcile_locked(&lock),
            Err(Error::Busy(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
        })
        .await?;
        if !gone.is_empty() {
            self.tell(Rewritten::Promoted);
        }
        self.mark_dirty();
        Ok(gone)
    }

    /// Undo an applied run (see [`crate::planning::review`]).
    pub async fn undo(&self, run: &str) -> Result<Undone, Error> {
        self.undo_part(run, &Undo::default()).await
    }

    /// Undo an applied run, or only the ops and op groups `what` names, with a note.
    pub async fn undo_part(&self, run: &str, what: &Undo) -> Result<Undone, Error> {
        records::check_id("run", run)?;
        let (run, mut what) = (run.to_string(), what.clone());
        what.note = self.gate("note", what.note.as_deref())?;
        let (undone, _, lock) = self
            .write(move |me, ledger| {
                let root = &me.inner.root;
                let journal = records::journal(root)?;
                let record = records::load_run(root, &run)?;
                let ops = (!what.ops.is_empty() || !what.groups.is_empty())
                    .then(|| review::undo_selection(&journal, &run, &what.ops, &what.groups))
                    .transpose()?;
                let scope = review::UndoScope { ops: ops.as_ref(), note: what.note.as_deref() };
                let now = me.inner.clock.now();
                let (mut change, undone) =
                    review::plan_undo(ledger, &journal, record, &run, scope, now, me.inner.clock.day_of(now))?;
                let promoted = me.promoted();
                change.memory_md = Promoted { text: &promoted }.without(&undone.removed);
                Ok((change, undone))
            })
            .await?;
        tracing::info!(run = %undone.run, exact = undone.exact, restored = undone.restored.len(), removed = undone.removed.len(), facts = undone.facts.len(), "run undone");
        let mut undone = undone;
        let (lock, usage) = self.after_commit(lock, None).await;
        drop(lock);
        undone.llm = usage;
        self.refresh_after_change().await;
        Ok(undone)
    }

    /// Apply a stored plan, rebased onto the current `memory.md` when only other entries changed.
    pub async fn apply_plan(&self, id: &str) -> Result<AppliedPlan, Error> {
        self.apply_plan_groups(id, None, None).await
    }

    /// Merge entries into the first of them (see [`crate::planning::curate`]): with `text`, or
    /// the LLM's text when one is configured and it keeps every detail, else the texts joined.
    pub async fn merge(&self, ids: &[String], text: Option<&str>, note: Option<&str>) -> Result<Curated, Error> {
        for id in ids {
            records::check_id("entry", id)?;
        }
        let (ids, note) = (ids.to_vec(), self.gate("note", note)?);
        let (text, from, llm) = match text {
            Some(text) => (text.to_string(), TextFrom::Given, Usage::default()),
            None => self.merged_text(&ids).await?,
        };
        let text = self.gate("text", Some(&text))?.unwrap_or_default();
        let started = self.inner.clock.now();
        let (done, _, lock) = self
            .write(move |me, ledger| {
                let run = curate::run_id(started, "merge", &ids.iter().map(String::as_str).collect::<Vec<_>>());
                let now = me.inner.clock.now();
                let request =
                    curate::Request { run: &run, note: note.as_deref(), now, today: me.inner.clock.day_of(now) };
                curate::plan_merge(&me.inner.root, ledger, &ids, &text, from, llm, &request)
            })
            .await?;
        tracing::info!(run = %done.run, entry = %done.entry, merged = ?done.retired, "entries merged");
        self.after_curation(done, lock).await
    }

    /// The text of a merge nobody wrote: the LLM's when it keeps every entry's details, else
    /// the texts joined. The entries are read without the lock; the merge checks them again.
    async fn merged_text(&self, ids: &[String]) -> Result<(String, TextFrom, Usage), Error> {
        let root = self.inner.root.clone();
        let ids_read = ids.to_vec();
        // memory.md alone: the archive is not needed to read the entries' texts.
        let entries: Vec<memfold_store::entries::Entry> = blocking(move || {
            let memory = memfold_store::ledger::read_entries(&root, &root.memory())?;
            Ok::<_, Error>(curate::mergeable(&memory, &ids_read)?.into_iter().cloned().collect())
        })
        .await?;
        let refs: Vec<&memfold_store::entries::Entry> = entries.iter().collect();
        let joined = curate::joined(&refs);
        let Some((client, prompts)) = self.inner.decider.llm() else {
            return Ok((joined, TextFrom::Joined, Usage::default()));
        };
        let shown: Vec<Merging> = entries
            .iter()
            .map(|e| Merging { id: e.id(), content: &e.content, updated: e.meta.updated.or(e.meta.first_seen) })
            .collect();
        match memfold_models::llm::merge::merged_text(client, &prompts.merge, &shown).await {
            Ok((text, usage)) => {
                let drops = curate::drops(&text, &refs);
                if drops.is_empty() {
                    Ok((text, TextFrom::Llm, usage))
                } else {
                    tracing::warn!(dropped = ?drops, "the LLM's merged text drops details; joining the texts instead");
                    Ok((joined, TextFrom::Joined, usage))
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "no merged text from the LLM; joining the texts");
                Ok((joined, TextFrom::Joined, Usage::default()))
            }
        }
    }

    /// Supersede entry `old` by another entry or by a new text (see [`crate::planning::curate`]).
    pub async fn supersede(&self, old: &str, by: Successor, note: Option<&str>) -> Result<Curated, Error> {
        records::check_id("entry", old)?;
        if let Successor::Entry(new) = &by {
            records::check_id("entry", new)?;
        }
        let (old, note) = (old.to_string(), self.gate("note", note)?);
        let by = match by {
            Successor::Text(text) => Successor::Text(self.gate("text", Some(&text))?.unwrap_or_default()),
            entry => entry,
        };
        let started = self.inner.clock.now();
        let (done, _, lock) = self
            .write(move |me, ledger| {
                let run = curate::run_id(started, "supersede", &[old.as_str()]);
                let now = me.inner.clock.now();
                let request =
                    curate::Request { run: &run, note: note.as_deref(), now, today: me.inner.clock.day_of(now) };
                curate::plan_supersede(&me.inner.root, ledger, &old, &by, &request)
            })
            .await?;
        tracing::info!(run = %done.run, entry = %done.entry, superseded = ?done.retired, "entry superseded");
        self.after_curation(done, lock).await
    }

    /// After a merge or supersession: `MEMORY.md` and the index catch up.
    async fn after_curation(
        &self,
        mut done: Curated,
        lock: memfold_store::sys::lock::LockGuard,
    ) -> Result<Curated, Error> {
        let (lock, usage) = self.after_commit(lock, Some(&done.run)).await;
        drop(lock);
        done.llm.add(usage);
        self.refresh_after_change().await;
        Ok(done)
    }

    /// Apply the op groups numbered `groups` of a stored plan (1-based, as
    /// [`Memory::plan_detail`] numbers them) and reject the rest, in one commit; `None`: the
    /// whole plan. Refused with nothing written when an entry the chosen ops change is not as
    /// the plan saw it.
    pub async fn apply_plan_groups(
        &self,
        id: &str,
        groups: Option<Vec<usize>>,
        note: Option<&str>,
    ) -> Result<AppliedPlan, Error> {
        records::check_id("plan", id)?;
        let note = self.gate("note", note.map(str::trim).filter(|n| !n.is_empty()))?;
        let id = id.to_string();
        let started = self.inner.clock.now();
        let (applied, _, lock) = self
            .write(move |me, ledger| {
                let root = &me.inner.root;
                let stored = records::load_plan(root, &id)?;
                if stored.status != records::PlanStatus::Pending {
                    // Also what is left of a plan applied in part.
                    return Err(Error::Conflict {
                        message: format!("plan {id} was {}; its facts are pending again", stored.status.as_str()),
                        ids: vec![id.clone()],
                    });
                }
                if records::run_path(root, &stored.id).exists() {
                    // Applied already (its run record exists): only the file is left to remove.
                    let mut change = Change::new(format!("remove applied plan {id}"));
                    change.records.push(records::plan_removal(&id));
                    return Ok((
                        change,
                        Err(Error::Conflict {
                            message: format!("plan {id} was applied already"),
                            ids: vec![id.clone()],
                        }),
                    ));
                }
                let day = stored.day.unwrap_or_else(|| me.inner.clock.day_of(stored.created));
                let now = me.inner.clock.now();
                let (mut plan, mut applied, rest) = match &groups {
                    None => {
                        let (plan, applied) = review::plan_apply(ledger, &stored, day)?;
                        (plan, applied, None)
                    }
                    Some(groups) => review::plan_apply_groups(ledger, &stored, groups, day)?,
                };
                plan.note = note;
                plan.plan_reason = Some(stored.reason.clone());
                plan.decider = Some(stored.head().decider());
                // A rebuild sets every entry aside: each one it does not keep is a change.
                let rebuild = stored.reason == PlanReason::Rebuild;
                let outcome = Outcome { rewrite_from: rebuild.then_some(&ledger.memory), ..Outcome::default() };
                let mut change = apply::change(root, ledger, &plan, outcome, started, now, day);
                if let Some(rest) = &rest {
                    applied.rejected = review::reject_rest(&mut change, ledger, rest, now);
                }
                Ok((change, Ok(applied)))
            })
            .await?;
        let mut applied = applied?;
        tracing::info!(plan = %applied.plan, rebased = applied.rebased, ops = applied.ops, "plan applied");
        let (lock, usage) = self.after_commit(lock, Some(&applied.run)).await;
        drop(lock);
        applied.llm = usage;
        self.refresh_after_change().await;
        Ok(applied)
    }

    /// Reject a stored plan: nothing is written to markdown; its facts stay pending, flagged.
    pub async fn reject_plan(&self, id: &str, note: Option<&str>) -> Result<RejectedPlan, Error> {
        records::check_id("plan", id)?;
        let note = self.gate("note", note.map(str::trim).filter(|n| !n.is_empty()))?;
        let id = id.to_string();
        let (rejected, _, _lock) = self
            .write(move |me, ledger| {
                let mut stored = records::load_plan(&me.inner.root, &id)?;
                stored.note = note;
                Ok(review::plan_reject(ledger, &stored, me.inner.clock.now()))
            })
            .await?;
        tracing::info!(plan = %rejected.plan, facts = rejected.facts.len(), "plan rejected");
        Ok(rejected)
    }
}

/// What an undo takes back: the whole run (no ops, no groups), or the ops (1-based op
/// numbers) and op groups (as `memfold run RUN` numbers them) named; and why.
#[derive(Debug, Clone, Default)]
pub struct Undo {
    pub ops: Vec<usize>,
    pub groups: Vec<usize>,
    pub note: Option<String>,
}
