//! Reads: status, verify, entries, history, runs and plans. None of them writes memory.

use super::views::{Chain, FactView, PlanDetail, PlanView, RunView, Status};
use super::{Memory, blocking};
use crate::commit;
use crate::consolidate::records;
use crate::corpus;
use crate::error::Error;
use crate::files::Problem;
use crate::files::entries::{Entry, EntryFile};
use crate::index::Index;
use crate::ledger::{Ledger, read_entries};
use crate::review;
use crate::verify::Report;

impl Memory {
    /// The gate, pending facts, entries and the last run.
    pub async fn status(&self) -> Result<Status, Error> {
        let me = self.clone();
        Ok(blocking(move || crate::status::status(&me.inner.root, &me.inner.config, me.inner.clock.now())).await?)
    }

    /// Prove that every archived fact is accounted for, and that the index (when there is one)
    /// holds exactly what the files say. Unless another writer is at work, an unfinished change
    /// is finished and entries deleted from `memory.md` by hand are recorded first, as any
    /// writer would.
    pub async fn verify(&self) -> Result<Report, Error> {
        let me = self.clone();
        let (busy, ledger) = blocking(move || -> Result<_, Error> {
            let busy = match me.lock() {
                Ok(lock) => {
                    me.reconcile_locked(&lock)?;
                    false
                }
                Err(Error::Busy(_)) => commit::pending(&me.inner.root),
                Err(e) => return Err(e),
            };
            Ok((busy, Ledger::load(&me.inner.root)?))
        })
        .await?;
        let mut extra = Vec::new();
        if busy {
            extra.push(Problem::new(
                ".memfold/commit.json",
                0,
                format!(
                    "a change is being written by {}; verify again when it is done",
                    crate::lock::holder(&self.inner.root.consolidate_lock())
                        .unwrap_or_else(|| "another process".into())
                ),
            ));
        }
        if self.inner.root.index_dir().exists() {
            extra.extend(self.index_problems().await?);
        }
        let mut report = crate::verify::verify(&ledger, extra);
        let root = self.inner.root.dir();
        report.warnings = crate::files::access::exposed(root)
            .iter()
            .map(|e| {
                let what = if e.path.is_empty() { root.display().to_string() } else { e.path.clone() };
                format!(
                    "{what} is mode {:o}: other accounts on this machine can read or change it; run `{}`",
                    e.mode,
                    crate::files::access::fix_for(root)
                )
            })
            .collect();
        Ok(report)
    }

    /// Bring the index up to date, then check that it holds exactly what the files say.
    async fn index_problems(&self) -> Result<Vec<Problem>, Error> {
        let index = self.index().await?;
        let (ledger, _) = corpus::refresh(&self.inner.root, index).await?;
        let want: std::collections::BTreeMap<String, String> =
            corpus::docs(&ledger).iter().map(|d| (d.key.clone(), Index::content_hash(d))).collect();
        let have = index.digest().await?;
        let mut problems = Vec::new();
        let rows = index.len().await?;
        if rows != have.len() {
            problems.push(Problem::new(
                ".memfold/index",
                0,
                format!("{rows} rows for {} keys: a key is duplicated", have.len()),
            ));
        }
        for (key, hash) in &want {
            if have.get(key) != Some(hash) {
                problems.push(Problem::new(".memfold/index", 0, format!("row {key} does not match the files")));
            }
        }
        for key in have.keys().filter(|k| !want.contains_key(*k)) {
            problems.push(Problem::new(".memfold/index", 0, format!("row {key} has no source in the files")));
        }
        Ok(problems)
    }

    /// The current entries of `consolidated/memory.md`.
    pub async fn entries(&self) -> Result<Vec<Entry>, Error> {
        let root = self.inner.root.clone();
        blocking(move || {
            EntryFile::read(&root.memory(), "consolidated/memory.md")
                .map(|file| file.entries().cloned().collect())
                .map_err(|source| Error::Read { path: "consolidated/memory.md".into(), source })
        })
        .await
    }

    /// One current entry.
    pub async fn entry(&self, id: &str) -> Result<Entry, Error> {
        let entries = self.entries().await?;
        entries
            .into_iter()
            .find(|e| e.id() == id)
            .ok_or_else(|| Error::NotFound { message: format!("no current entry has id {id}") })
    }

    /// One archived fact, where it is and where it went.
    pub async fn fact(&self, id: &str) -> Result<FactView, Error> {
        let (root, id) = (self.inner.root.clone(), id.to_string());
        blocking(move || review::fact_view(&Ledger::load(&root)?, &id)).await
    }

    /// An entry's versions and those linked to it.
    pub async fn history(&self, id: &str) -> Result<Chain, Error> {
        let (root, id) = (self.inner.root.clone(), id.to_string());
        // The chain is in memory.md and history.md; the archive is not read.
        blocking(move || {
            let (memory, history) = (read_entries(&root, &root.memory())?, read_entries(&root, &root.history())?);
            review::history_chain(&memory, &history, &id)
        })
        .await
    }

    /// Applied runs, oldest first.
    pub async fn runs(&self) -> Result<Vec<RunView>, Error> {
        let root = self.inner.root.clone();
        blocking(move || review::runs(&root)).await
    }

    /// Stored plans, pending and rejected, oldest first.
    pub async fn plans(&self) -> Result<Vec<PlanView>, Error> {
        let root = self.inner.root.clone();
        blocking(move || review::plans(&root)).await
    }

    /// A stored plan with its ops in groups and its facts as archived.
    pub async fn plan_detail(&self, id: &str) -> Result<PlanDetail, Error> {
        records::check_id("plan", id)?;
        let (root, id) = (self.inner.root.clone(), id.to_string());
        blocking(move || review::plan_detail(&root, &id)).await
    }
}
