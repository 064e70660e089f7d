//! Ingest: facts appended to the archive, and facts extracted from a conversation turn.

use super::{Memory, blocking};
use crate::error::Error;
use crate::memory::Turn;
use memfold_models::llm::{Usage, extract};
use memfold_store::Root;
use memfold_store::archive::{self, Fact, NewFact};
use memfold_store::caches::KeyCache;
use memfold_store::config::{Config, IngestConfig};
use memfold_store::sys::guard;

/// Facts that passed [`Memory::check_facts`] (or came checked from a turn's extraction): what
/// [`Memory::add`] appends. Checked once, at the door of the request they came with, so a
/// batch of several requests never fails for one of them.
#[derive(Debug, Clone, Default)]
pub struct CheckedFacts(Vec<NewFact>);

impl CheckedFacts {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Join another checked batch to this one.
    pub fn extend(&mut self, other: CheckedFacts) {
        self.0.extend(other.0);
    }
}

/// The one check of arriving facts, before they may be appended: at least one, none without
/// text, none dated outside the years 1000 to 9999, none longer than `ingest.max_fact_bytes`.
/// A credential in a fact is redacted, refused or let be as `ingest.secrets` says, before
/// anything else sees the text.
pub fn check(ingest: &IngestConfig, facts: Vec<NewFact>) -> Result<CheckedFacts, Error> {
    if facts.is_empty() {
        return Err(Error::BadInput("no facts given".into()));
    }
    let mut facts = facts;
    memfold_store::secrets::apply(ingest.secrets, &mut facts).map_err(Error::BadInput)?;
    archive::check_new(&facts, ingest.max_fact_bytes).map_err(|e| match e {
        archive::ArchiveError::TooLong { .. } => Error::TooLarge(e.to_string()),
        e => Error::BadInput(e.to_string()),
    })?;
    Ok(CheckedFacts(facts))
}

/// Append facts to `root`'s archive without a [`Memory`] open: for an agent's hook when the
/// daemon is down. The same check as every door's facts, and the configured clock (`time.zone`),
/// so a fact lands in the day file and at the time of day it would have through the daemon.
pub fn append_without_daemon(root: &Root, config: &Config, facts: Vec<NewFact>) -> Result<Vec<Fact>, Error> {
    let facts = check(&config.ingest, facts)?;
    Ok(archive::Appender::default().append(root, &facts.0, config.clock().wall_now())?)
}

impl Memory {
    /// Check facts before they may be appended ([`check`] with this memory's settings).
    pub fn check_facts(&self, facts: Vec<NewFact>) -> Result<CheckedFacts, Error> {
        check(&self.inner.config.ingest, facts)
    }

    /// A text that enters memory other than as a fact (a curation's text, a note, a reason)
    /// through the one secret gate ([`memfold_store::secrets::gate`]), as `ingest.secrets` says.
    pub fn gate(&self, what: &str, text: Option<&str>) -> Result<Option<String>, Error> {
        let policy = self.inner.config.ingest.secrets;
        text.map(|t| memfold_store::secrets::gate(policy, what, t).map_err(Error::BadInput)).transpose()
    }

    /// The fact that copies entry `id` of this memory, space `space` of a home, into another
    /// space: the entry's text, with a source naming the space and the entry
    /// (`share:<space>/<entry>`). Nothing is written here.
    pub async fn shared_fact(&self, space: &str, id: &str) -> Result<NewFact, Error> {
        let entry = self.entry(id).await?;
        Ok(NewFact { text: entry.content.clone(), date: None, source: Some(format!("share:{space}/{}", entry.id())) })
    }

    /// Append checked facts to their day's archive (blocking).
    pub fn add(&self, facts: CheckedFacts) -> Result<Vec<Fact>, Error> {
        let facts = facts.0;
        let now = self.inner.clock.wall_now();
        let added = guard(&self.inner.appender).append(&self.inner.root, &facts, now)?;
        self.mark_dirty();
        Ok(added)
    }

    /// Ask the LLM for the facts in a conversation turn (`prompts/extract.md`). Nothing is
    /// stored: the caller appends them, all or none.
    pub async fn extract_turn(&self, turn: &Turn) -> Result<(CheckedFacts, Usage), Error> {
        if turn.text.trim().is_empty() {
            return Err(Error::BadInput("the turn is empty".into()));
        }
        if let Some(date) = turn.date.filter(|d| !archive::date_in_range(*d)) {
            return Err(Error::BadInput(format!(
                "the turn is dated {date}: a fact's day must fall in the years 1000 to 9999"
            )));
        }
        let policy = self.inner.config.ingest.secrets;
        let (text, _) = memfold_store::secrets::hold(policy, &turn.text).map_err(|first| {
            Error::BadInput(format!(
                "the turn holds a {} at character {}; nothing was stored (ingest.secrets = \"refuse\")",
                first.kind,
                first.position(&turn.text)
            ))
        })?;
        let Some(chat) = &self.inner.chat else {
            return Err(Error::NoLlm(
                "no LLM is configured ([llm] base_url is empty), so facts cannot be extracted from a turn; \
                 nothing was stored. Store facts directly (`memfold add`, POST /facts, the MCP tool memory_add), \
                 or configure an LLM"
                    .into(),
            ));
        };
        let today = turn.date.unwrap_or_else(|| self.inner.clock.today());
        let system = extract::system_message(&self.inner.prompts.extract, self.inner.taxonomy.attributes());
        let (found, usage) = extract::facts(chat, &system, &text, today).await?;
        let source = Some(turn.source.clone().unwrap_or_else(|| "turn".into()));
        // The LLM saw the turn masked; what it answers is held to the policy all the same.
        let mut facts: Vec<NewFact> =
            found.iter().map(|f| NewFact { text: f.text.clone(), date: turn.date, source: source.clone() }).collect();
        memfold_store::secrets::apply(policy, &mut facts).map_err(Error::BadInput)?;
        if let Err(e) = archive::check_new(&facts, self.inner.config.ingest.max_fact_bytes) {
            return Err(Error::LlmReply(format!(
                "the LLM extracted an unusable fact: {e}; nothing was stored, send the turn again or in smaller parts"
            )));
        }
        // The keys are derived data: cached by text for the pass that decides these facts.
        let keyed: Vec<(String, Vec<String>)> =
            found.into_iter().filter(|f| !f.keys.is_empty()).map(|f| (f.text, f.keys)).collect();
        if !keyed.is_empty() && self.inner.config.consolidation.aspect_k > 0 {
            let root = self.inner.root.clone();
            let cached = blocking(move || {
                let mut cache = KeyCache::load(&root);
                cache.insert(&keyed);
                cache.save()
            })
            .await;
            if let Err(e) = cached {
                tracing::warn!(error = %e, "the keys of extracted facts were not cached");
            }
        }
        Ok((CheckedFacts(facts), usage))
    }
}

/// What one drain of the spool did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Drained {
    /// Turns extracted and taken out of the spool.
    pub turns: usize,
    /// Facts they gave.
    pub facts: usize,
    /// Turns left for the next drain (the LLM failed on them).
    pub left: usize,
    /// Turns set aside in `spool/failed/` (unreadable).
    pub set_aside: usize,
}

impl Memory {
    /// Extract the turns the agent hooks spooled (oldest first), append their facts, and take
    /// each out of the spool once its facts are in the archive. A turn the LLM fails on stays
    /// for the next drain; with no LLM configured nothing is taken.
    pub async fn drain_spool(&self) -> Result<Drained, Error> {
        use memfold_store::agents::capture;
        let mut drained = Drained::default();
        if self.inner.chat.is_none() {
            return Ok(drained);
        }
        let root = self.inner.root.clone();
        let files = blocking(move || capture::spooled(&root)).await;
        for path in files {
            let read = {
                let path = path.clone();
                blocking(move || capture::read_spooled(&path)).await
            };
            let spooled = match read {
                Ok(spooled) => spooled,
                Err(why) => {
                    tracing::warn!(why, "a spooled turn cannot be read; set aside in spool/failed/");
                    let path = path.clone();
                    if blocking(move || capture::set_aside(&path)).await.is_ok() {
                        drained.set_aside += 1;
                    }
                    continue;
                }
            };
            let turn = Turn { text: spooled.text, date: spooled.date, source: Some(spooled.source) };
            match self.extract_turn(&turn).await {
                Ok((facts, _)) => {
                    let n = facts.len();
                    if n > 0 {
                        let me = self.clone();
                        blocking(move || me.add(facts)).await?;
                    }
                    let path = path.clone();
                    blocking(move || capture::unspool(&path)).await.map_err(|e| Error::Other(e.to_string()))?;
                    drained.turns += 1;
                    drained.facts += n;
                }
                // A turn the doors would refuse (empty, dated out of range) never will be extracted.
                Err(e @ Error::BadInput(_)) => {
                    tracing::warn!(file = %path.display(), error = %e, "a spooled turn cannot be extracted; set aside in spool/failed/");
                    if blocking(move || capture::set_aside(&path)).await.is_ok() {
                        drained.set_aside += 1;
                    }
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "a spooled turn was not extracted; it stays for the next drain");
                    drained.left += 1;
                }
            }
        }
        Ok(drained)
    }
}

/// What an import did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Imported {
    /// Facts appended.
    pub added: usize,
    /// Facts already in the archive with the same source and text (an import run before).
    pub present: usize,
}

impl Memory {
    /// Append imported facts that the archive does not hold yet (the same source and text, as
    /// they would be stored: a credential redacted): importing twice adds nothing. Facts too
    /// long or dated out of range are refused as [`Memory::check_facts`] refuses them.
    pub async fn import(&self, facts: Vec<NewFact>) -> Result<Imported, Error> {
        if facts.is_empty() {
            return Ok(Imported::default());
        }
        // Held to the policy first, so what is compared is what the archive would hold.
        let facts = self.check_facts(facts)?.0;
        let root = self.inner.root.clone();
        let archive = blocking(move || archive::read_all(&root)).await.map_err(|e| Error::Other(e.to_string()))?;
        let stored = |f: &NewFact| (f.source.as_deref().map(archive::stored_text), archive::stored_text(&f.text));
        let mut seen: std::collections::HashSet<(Option<String>, String)> =
            archive.facts.iter().map(|f| (f.src.clone(), f.text.clone())).collect();
        let mut imported = Imported::default();
        let mut new = Vec::new();
        for fact in facts {
            if seen.insert(stored(&fact)) {
                new.push(fact);
            } else {
                imported.present += 1;
            }
        }
        if new.is_empty() {
            return Ok(imported);
        }
        imported.added = new.len();
        let checked = CheckedFacts(new);
        let me = self.clone();
        blocking(move || me.add(checked)).await?;
        Ok(imported)
    }
}
