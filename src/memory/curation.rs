//! Curation: forget, pin, hand deletions, undo, and applying or rejecting a stored plan.

use super::views::{AppliedPlan, Forgotten, RejectedPlan, Undone};
use super::{Memory, Rewritten, blocking};
use crate::error::Error;
use crate::planning::consolidate::apply::{self, Outcome};
use crate::planning::consolidate::records::{self, PlanReason};
use crate::planning::forget::{self, Promoted};
use crate::planning::review;
use crate::store::commit::Change;

impl Memory {
    /// Forget an entry (to history as deleted, tombstoned with its facts) or a pending fact.
    pub async fn forget(&self, id: &str, reason: Option<&str>) -> Result<Forgotten, Error> {
        let (id, reason) = (id.to_string(), reason.map(str::to_string));
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
        records::check_id("run", run)?;
        let run = run.to_string();
        let (undone, _, lock) = self
            .write(move |me, ledger| {
                let journal = records::journal(&me.inner.root)?;
                let record = records::load_run(&me.inner.root, &run)?;
                let now = me.inner.clock.now();
                let (mut change, undone) =
                    review::plan_undo(ledger, &journal, record, &run, now, me.inner.clock.day_of(now))?;
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
        self.apply_plan_groups(id, None).await
    }

    /// Apply the op groups numbered `groups` of a stored plan (1-based, as
    /// [`Memory::plan_detail`] numbers them) and reject the rest, in one commit; `None`: the
    /// whole plan. Refused with nothing written when an entry the chosen ops change is not as
    /// the plan saw it.
    pub async fn apply_plan_groups(&self, id: &str, groups: Option<Vec<usize>>) -> Result<AppliedPlan, Error> {
        records::check_id("plan", id)?;
        let id = id.to_string();
        let started = self.inner.clock.now();
        let (applied, _, lock) = self
            .write(move |me, ledger| {
                let root = &me.inner.root;
                let stored = records::load_plan(root, &id)?;
                if stored.status == records::PlanStatus::Rejected {
                    // Also what is left of a plan applied in part.
                    return Err(Error::Conflict {
                        message: format!("plan {id} was rejected; its facts are pending again"),
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
                let (plan, mut applied, rest) = match &groups {
                    None => {
                        let (plan, applied) = review::plan_apply(ledger, &stored, day)?;
                        (plan, applied, None)
                    }
                    Some(groups) => review::plan_apply_groups(ledger, &stored, groups, day)?,
                };
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
    pub async fn reject_plan(&self, id: &str) -> Result<RejectedPlan, Error> {
        records::check_id("plan", id)?;
        let id = id.to_string();
        let (rejected, _, _lock) = self
            .write(move |me, ledger| {
                let stored = records::load_plan(&me.inner.root, &id)?;
                Ok(review::plan_reject(ledger, &stored, me.inner.clock.now()))
            })
            .await?;
        tracing::info!(plan = %rejected.plan, facts = rejected.facts.len(), "plan rejected");
        Ok(rejected)
    }
}
