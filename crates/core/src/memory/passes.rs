//! Consolidation passes and rebuilds: gate, plan, commit, promote, reindex.

use std::time::Instant;

use super::{Memory, Rewritten, blocking};
use crate::error::Error;
use crate::planning::consolidate::gate::{self, Gate, GateInput};
use crate::planning::consolidate::pass::{
    AspectRun, Pass, PassOptions, PassPlan, PassReport, PassRun, eligible, ms, run_id,
};
use crate::planning::consolidate::rebuild;
use crate::planning::promote::{self, PromoteInput, PromoteReport};
use crate::planning::run::records;
use memfold_models::llm::ChatClient;
use memfold_store::Problem;
use memfold_store::Root;
use memfold_store::caches::KeyCache;
use memfold_store::commit;
use memfold_store::config::Config;
use memfold_store::content_hash;
use memfold_store::entries::Entry;
use memfold_store::ledger::Ledger;
use memfold_store::promoted::{self, PromotedError};
use memfold_store::sys::lock::LockGuard;
use std::collections::HashSet;

impl Memory {
    /// Run a pass if the gate is open (or `force`); with `dry_run`, plan and report only.
    pub async fn consolidate(&self, opts: PassOptions) -> Result<PassReport, Error> {
        let clock = Instant::now();
        let started = self.inner.clock.now();
        let me = self.clone();
        let (lock, holder, ledger, marks) = blocking(move || -> Result<_, Error> {
            let (lock, holder, ledger) = if opts.dry_run {
                // A dry run takes no lock, but says so when a pass holds it, as that pass would.
                let holder = memfold_store::sys::lock::holder(&me.inner.root.consolidate_lock());
                (None, holder, Ledger::load(&me.inner.root)?)
            } else {
                let (lock, ledger) = me.lock_and_read()?;
                me.expire_plans(&lock)?;
                (Some(lock), None, ledger)
            };
            Ok((lock, holder, ledger, records::plan_marks(&me.inner.root)))
        })
        .await?;
        let (under_review, rejected) = (marks.under_review, marks.rejected);
        let cfg = &self.inner.config.consolidation;
        let pending = eligible(&ledger, &under_review, cfg, opts.force);
        let gate = gate::evaluate(
            cfg,
            &GateInput {
                lock_holder: holder.as_deref(),
                last_run: ledger.state.last_run.as_ref().map(|r| r.finished),
                now: started,
                pending: pending.len(),
                force: opts.force,
            },
        );
        let mut report = PassReport::new(gate, &self.inner.decider, cfg, opts.dry_run);
        if !report.gate.open {
            report.timings.total_ms = ms(clock);
            return Ok(report);
        }
        let run = run_id(started, &pending);
        report.run = Some(run.clone());
        tracing::info!(run = %run, pending = pending.len(), decider = %self.decider(), "pass started");
        let planned = PassRun { ledger: &ledger, pending: &pending, run, started, opts, rebuild: None };
        self.run_pass(planned, lock, rejected, report, clock).await
    }

    /// Set the current entries aside and consolidate every archived fact that is not
    /// tombstoned again, in one commit (see [`crate::planning::consolidate::rebuild`]). In review mode
    /// the whole rebuild is stored as one plan; a fact left undecided (the LLM out of reach,
    /// an unusable reply) fails it and nothing is written.
    pub async fn rebuild(&self) -> Result<PassReport, Error> {
        let clock = Instant::now();
        let started = self.inner.clock.now();
        let today = self.inner.clock.day_of(started);
        let me = self.clone();
        let (lock, ledger, marks) = blocking(move || -> Result<_, Error> {
            let (lock, ledger) = me.lock_and_read()?;
            // A rebuild rewrites every block: one a person must mend would be cemented (a broken
            // header turned into text, entries an open block hides folded into it).
            let memory = &ledger.memory;
            if memory.entries().any(|e| e.needs_mending()) || !memory.unreadable_facts.is_empty() {
                let first = memory
                    .problems
                    .first()
                    .cloned()
                    .unwrap_or_else(|| Problem::new("consolidated/memory.md", 0, "a block to mend"));
                return Err(Error::Unreadable(Problem {
                    message: format!(
                        "{}; a rebuild writes nothing until memory.md is mended (see `memfold verify`)",
                        first.message
                    ),
                    ..first
                }));
            }
            Ok((lock, ledger, records::plan_marks(&me.inner.root)))
        })
        .await?;
        let (under_review, rejected) = (marks.under_review, marks.rejected);
        let all = eligible(&ledger, &under_review, &self.inner.config.consolidation, true);
        let run = run_id(started, &all);
        let (planning, blocks) = rebuild::set_aside(&ledger, &run, today);
        let pending = eligible(&planning, &under_review, &self.inner.config.consolidation, true);
        let gate = Gate {
            open: true,
            reason: format!("rebuild: {} facts, {} entries set aside", pending.len(), blocks.len()),
        };
        let mut report = PassReport::new(gate, &self.inner.decider, &self.inner.config.consolidation, false);
        report.run = Some(run.clone());
        tracing::info!(run = %run, pending = pending.len(), set_aside = blocks.len(), "rebuild started");
        let planned = PassRun {
            ledger: &planning,
            pending: &pending,
            run,
            started,
            opts: PassOptions { force: true, dry_run: false },
            rebuild: Some((&ledger.memory, blocks)),
        };
        self.run_pass(planned, Some(lock), rejected, report, clock).await
    }

    /// Mark the plans older than `review.expire_days` expired (blocking, lock held), so this
    /// pass decides their facts again.
    fn expire_plans(&self, lock: &LockGuard) -> Result<(), Error> {
        let root = &self.inner.root;
        let days = self.inner.config.review.expire_days;
        if let Some((change, expired)) = crate::planning::review::plan_expire(root, days, self.inner.clock.now())? {
            commit::commit(root, &change, lock)?;
            tracing::info!(plans = ?expired, days, "plans expired; their facts are decided again");
        }
        Ok(())
    }

    /// Plan, commit, promote and reindex one pass whose gate is open.
    async fn run_pass(
        &self,
        run: PassRun<'_>,
        lock: Option<LockGuard>,
        rejected: HashSet<(String, String)>,
        mut report: PassReport,
        clock: Instant,
    ) -> Result<PassReport, Error> {
        let aspects = self
            .aspects()
            .await?
            .map(|aspects| AspectRun { aspects, cache: std::sync::Mutex::new(KeyCache::load(&self.inner.root)) });
        let embedder = self.index().await?.embedder();
        let config = &self.inner.config.consolidation;
        let pass = Pass::new(config, run.rebuild.is_some(), embedder, &self.inner.decider, aspects, rejected);
        let planned = pass.plan_run(&self.inner.root, &run, &mut report, &self.inner.clock).await;
        if let Some(aspects) = pass.aspects {
            let mut cache = aspects.cache.into_inner().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = blocking(move || cache.save()).await {
                tracing::warn!(error = %e, "aspect keys not cached");
            }
        }
        let PassPlan { change, ops, failures } = planned?;
        let Some(change) = change else {
            report.timings.total_ms = ms(clock);
            return Ok(report);
        };
        let step = Instant::now();
        let rewrote = change.memory.is_some();
        let root = self.inner.root.clone();
        let lock = lock.ok_or_else(|| Error::Other("a pass that writes holds the lock".into()))?;
        // The guard goes with the write: dropping this task cannot release the lock mid-write.
        let lock = blocking(move || commit::commit(&root, &change, &lock).map(|()| lock)).await?;
        report.timings.write_ms = ms(step);
        if rewrote {
            let step = Instant::now();
            let (_lock, usage) = self.after_commit(lock, report.applied.then_some(run.run.as_str())).await;
            report.llm.add(usage);
            report.timings.promote_ms = ms(step);
        } else {
            drop(lock);
        }
        let step = Instant::now();
        self.mark_dirty();
        self.refresh().await?;
        report.timings.reindex_ms = ms(step);
        report.timings.total_ms = ms(clock);
        tracing::info!(run = %run.run, ops, failed = failures, "pass done");
        Ok(report)
    }

    /// Rewrite `MEMORY.md` from the current entries and the recall log.
    pub async fn promote(&self) -> Result<PromoteReport, Error> {
        let llm = self.inner.chat.as_ref().map(|client| (client, self.inner.prompts.promote.as_str()));
        let report =
            promote_root(&self.inner.root, &self.inner.config, llm).await.map_err(|e| Error::Other(e.to_string()))?;
        self.tell(Rewritten::Promoted);
        Ok(report)
    }
}

/// Why `MEMORY.md` was not rewritten.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromoteError {
    #[error(transparent)]
    Ledger(#[from] memfold_store::ledger::LedgerError),
    #[error(transparent)]
    File(#[from] PromotedError),
    #[error(transparent)]
    State(#[from] memfold_store::state::StateError),
}

/// Promote in `root`: read the entries, the recall log, `MEMORY.md` and the record, plan the
/// lines ([`crate::planning::promote`]), write them.
pub(crate) async fn promote_root(
    root: &Root,
    config: &Config,
    llm: Option<(&ChatClient, &str)>,
) -> Result<PromoteReport, PromoteError> {
    let (r, window, prompt_hash) = (root.clone(), config.recall.window_days, llm.map(|(_, p)| content_hash(p)));
    let (ledger, recalled, before_text, last) = blocking(move || -> Result<_, PromoteError> {
        let ledger = Ledger::load(&r)?;
        let recalled = memfold_store::recall::summary(&r, window)?;
        let before_text = promoted::read(&r)?;
        let last = match &prompt_hash {
            Some(hash) => promoted::read_record(&r, hash)?,
            None => None,
        };
        Ok((ledger, recalled, before_text, last))
    })
    .await?;
    // A block a person must mend (a broken header, text hiding entries) is no fact to promote.
    let entries: Vec<&Entry> = ledger.memory.entries().filter(|e| !e.needs_mending()).collect();
    let input = PromoteInput { entries, recalled: &recalled, before_text: &before_text, last };
    let planned = promote::promote(input, config, llm).await;
    let root = root.clone();
    blocking(move || promoted::write(&root, planned.text.as_deref(), &planned.expected, &planned.record)).await?;
    Ok(planned.report)
}
