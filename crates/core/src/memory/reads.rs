//! Reads: status, verify, entries, history, runs and plans, the served files; and the review
//! page's sign-in codes. None of them writes memory.

use super::views::{AboutAnswer, Chain, FactView, PlanDetail, PlanView, RunDetail, RunView, Status};
use super::{Memory, Rewritten, blocking};
use crate::error::Error;
use crate::planning::review;
use crate::planning::run::records;
use memfold_index::Index;
use memfold_index::corpus;
use memfold_store::commit;
use memfold_store::config::Config;
use memfold_store::entries::{Entry, EntryFile};
use memfold_store::ledger::{Ledger, read_entries};
use memfold_store::verify::Report;
use memfold_store::{Problem, Root, signin};

impl Memory {
    /// The text of `memory.md` or `MEMORY.md` (empty when the file does not exist).
    pub async fn file_text(&self, file: Rewritten) -> Result<String, Error> {
        let path = match file {
            Rewritten::Memory => self.inner.root.memory(),
            Rewritten::Promoted => self.inner.root.memory_md(),
        };
        match tokio::fs::read_to_string(&path).await {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(source) => Err(Error::Read { path: file.file().to_string(), source }),
        }
    }

    /// Mint a one-time sign-in code for the review page of the root `config` names, or, for a
    /// home without a space, the operator's ([`memfold_store::signin`]); nothing need be open.
    pub fn mint_sign_in_code(config: &Config) -> Result<String, Error> {
        let dir = match (&config.home, &config.space) {
            (Some(home), None) => memfold_store::home::Home::new(home).codes_dir(),
            _ => {
                let root = Root::new(&config.root);
                root.check_initialized().map_err(Error::NotARoot)?;
                root.codes_dir()
            }
        };
        signin::mint_code(&dir).map_err(|source| Error::Read { path: dir.display().to_string(), source })
    }

    /// The gate, pending facts, entries and the last run.
    pub async fn status(&self) -> Result<Status, Error> {
        let me = self.clone();
        Ok(blocking(move || {
            crate::memory::status::status_with_curation(&me.inner.root, &me.inner.config, me.inner.clock.now())
        })
        .await?)
    }

    /// Prove that every archived fact is accounted for, and that the index (when there is one)
    /// holds exactly what the files say. Unless another writer is at work, an unfinished change
    /// is finished and entries deleted from `memory.md` by hand are recorded first, as any
    /// writer would.
    pub async fn verify(&self) -> Result<Report, Error> {
        let me = self.clone();
        let (busy, ledger) = blocking(move || -> Result<_, Error> {
            match me.lock_and_read() {
                Ok((_lock, ledger)) => Ok((false, ledger)),
                Err(Error::Busy(_)) => Ok((commit::pending(&me.inner.root), Ledger::load(&me.inner.root)?)),
                Err(e) => Err(e),
            }
        })
        .await?;
        let mut extra = Vec::new();
        if busy {
            extra.push(Problem::new(
                ".memfold/commit.json",
                0,
                format!(
                    "a change is being written by {}; verify again when it is done",
                    memfold_store::sys::lock::holder(&self.inner.root.consolidate_lock())
                        .unwrap_or_else(|| "another process".into())
                ),
            ));
        }
        if self.inner.root.index_dir().exists() {
            extra.extend(self.index_problems().await?);
        }
        let mut report = memfold_store::verify::verify(&ledger, extra);
        let root = self.inner.root.dir();
        report.warnings.extend(memfold_store::sys::access::exposed(root).iter().map(|e| {
            let what = if e.path.is_empty() { root.display().to_string() } else { e.path.clone() };
            format!(
                "{what} is mode {:o}: other accounts on this machine can read or change it; run `{}`",
                e.mode,
                memfold_store::sys::access::fix_for(root)
            )
        }));
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

    /// What memory holds about `name` (a person, pet, place, project): the current entries
    /// that name it or are linked to one by it, and with `history` the older versions that
    /// named it. Without a name, the names memory speaks of.
    pub async fn about(&self, name: Option<&str>, history: bool) -> Result<AboutAnswer, Error> {
        let root = self.inner.root.clone();
        let name = name.map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
        blocking(move || {
            let memory = read_entries(&root, &root.memory())?;
            Ok(match name {
                Some(name) => {
                    let older = if history { Some(read_entries(&root, &root.history())?) } else { None };
                    AboutAnswer::About(crate::planning::about::about(&memory, older.as_ref(), &name))
                }
                None => AboutAnswer::Names { names: crate::planning::about::names_of(&memory) },
            })
        })
        .await
    }

    /// Turns the agent hooks spooled that wait for extraction.
    pub async fn spooled(&self) -> usize {
        let root = self.inner.root.clone();
        blocking(move || memfold_store::agents::capture::spooled(&root).len()).await
    }

    /// Applied runs, oldest first.
    pub async fn runs(&self) -> Result<Vec<RunView>, Error> {
        let root = self.inner.root.clone();
        blocking(move || review::runs(&root)).await
    }

    /// One applied run with its ops in groups (what `undo --op` and `--group` name).
    pub async fn run_detail(&self, run: &str) -> Result<RunDetail, Error> {
        let (root, run) = (self.inner.root.clone(), run.to_string());
        blocking(move || review::run_detail(&root, &run)).await
    }

    /// Every plan: pending, applied, rejected and expired, oldest first.
    pub async fn all_plans(&self) -> Result<Vec<PlanView>, Error> {
        let root = self.inner.root.clone();
        blocking(move || review::all_plans(&root)).await
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
