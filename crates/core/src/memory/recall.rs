//! Recall for a prompt: the few entries worth an agent's context for what the person just
//! asked (the prompt hook, `POST /recall`). The candidates come from the search; which of them
//! to hand over is [`crate::planning::recall`]'s choice; what a session was told is kept with
//! the session, so an unchanged entry is told once.

use serde::Serialize;

use super::{Memory, SearchRequest, blocking};
use crate::error::Error;
use crate::planning::recall::{self, Candidate, Settings};
use memfold_index::DocKind;
use memfold_store::agents::capture::Told;

/// What a recall asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecallRequest {
    /// The agent and its session (`claude-code`, the session id): what the session was told
    /// already is not told again.
    pub session: Option<(String, String)>,
    /// Characters, at most (default `hooks.prompt_max_chars`).
    pub budget: Option<usize>,
}

/// One line recalled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecalledLine {
    pub id: String,
    /// `entry` or `fact`.
    pub kind: &'static str,
    pub text: String,
    pub date: chrono::NaiveDate,
    pub sources: Vec<String>,
}

/// What a recall hands over: the lines, and them rendered for the agent (empty: nothing).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recalled {
    pub lines: Vec<RecalledLine>,
    pub text: String,
}

/// The part of a prompt a recall reads: its first thousand characters, trimmed.
fn recall_prompt(prompt: &str) -> String {
    prompt.trim().chars().take(1_000).collect()
}

/// Candidates looked at for one prompt.
const CANDIDATES: usize = 30;

/// Candidates added for a prompt naming a day or a month: the best dated then.
const DATED: usize = 10;

impl Memory {
    /// The lines to hand an agent for `prompt` (see the module docs). The entries handed over
    /// count as recalled (the recall log, which ranks `MEMORY.md`), except a shared space's.
    pub async fn recall(&self, prompt: &str, request: &RecallRequest) -> Result<Recalled, Error> {
        let candidates = self.recall_candidates(prompt).await?;
        self.recall_from(prompt, candidates, request).await
    }

    /// [`Memory::recall`] from candidates gathered already (this memory's, and a home's shared
    /// spaces' beside them).
    pub async fn recall_from(
        &self,
        prompt: &str,
        candidates: Vec<Candidate>,
        request: &RecallRequest,
    ) -> Result<Recalled, Error> {
        let prompt = recall_prompt(prompt);
        if candidates.is_empty() {
            return Ok(Recalled::default());
        }
        let root = self.inner.root.clone();
        let (told, memory_md) = {
            let (root, session) = (root.clone(), request.session.clone());
            let shown = self.inner.config.hooks.session_start_max_chars;
            blocking(move || {
                let told = match session {
                    Some((agent, session)) => Told::load(&root, &agent, &session),
                    None => Told::default(),
                };
                // Session start hands over the head of MEMORY.md, as much as its cap holds.
                let (head, _) = super::agents::memory_md_head(&root, shown * 4);
                (told, head.chars().take(shown).collect::<String>())
            })
            .await
        };
        // What session start showed of MEMORY.md is in the agent's context: its lines count as
        // told.
        let mut known = told.entries.clone();
        for c in candidates.iter().filter(|c| !c.text.trim().is_empty() && memory_md.contains(c.text.trim())) {
            known.insert(recall::told_id(c), recall::told_key(c));
        }
        let mut settings = self.recall_settings();
        settings.budget = request.budget.unwrap_or(settings.budget);
        let chosen = recall::choose(&prompt, &candidates, &settings, &known);
        let lines: Vec<RecalledLine> = chosen
            .iter()
            .map(|c| {
                let hit = &candidates[c.at];
                RecalledLine {
                    id: hit.id.clone(),
                    kind: match (hit.until, hit.entry) {
                        (Some(_), _) => "history",
                        (None, true) => "entry",
                        (None, false) => "fact",
                    },
                    text: hit.text.clone(),
                    date: hit.date,
                    sources: hit.sources.clone(),
                }
            })
            .collect();
        let text: String = chosen.iter().map(|c| format!("{}\n", c.line)).collect();
        // A shared space's entries count in no one's recall log (as with search).
        let ids: Vec<String> =
            chosen.iter().filter(|c| candidates[c.at].space.is_none()).map(|c| candidates[c.at].id.clone()).collect();
        let window = self.inner.config.recall.window_days;
        let session = request.session.clone();
        let told_now: Vec<(String, String)> =
            chosen.iter().map(|c| (recall::told_id(&candidates[c.at]), recall::told_key(&candidates[c.at]))).collect();
        blocking(move || {
            if let Err(e) = memfold_store::recall::record(&root, &prompt, &ids, window) {
                tracing::warn!(error = %e, "could not record recall");
            }
            if let Some((agent, session)) = session.filter(|_| !told_now.is_empty()) {
                let mut told = told;
                told.entries.extend(told_now);
                if let Err(e) = told.save(&root, &agent, &session) {
                    tracing::warn!(error = %e, "could not record what the session was told");
                }
            }
        })
        .await;
        Ok(Recalled { lines, text })
    }

    /// The candidates a recall weighs for `prompt`: the search's best entries and pending
    /// facts, the recall log left alone; for a prompt that asks what was true then
    /// ([`recall::asks_what_was_true`]), the older versions of entries too; for a prompt that
    /// names a day or a month ([`recall::days_named`]: "on 3 June, 2023", "yesterday", "last
    /// week"), the best of what is dated then as well, which a search of all memory may rank
    /// below its first thirty.
    pub async fn recall_candidates(&self, prompt: &str) -> Result<Vec<Candidate>, Error> {
        let prompt = recall_prompt(prompt);
        if prompt.is_empty() {
            return Ok(Vec::new());
        }
        let past = recall::asks_what_was_true(&prompt);
        let k = if past { CANDIDATES + CANDIDATES / 3 } else { CANDIDATES };
        let search = SearchRequest { k: Some(k), history: past, skip_recall: true, ..SearchRequest::default() };
        let mut hits = self.search(&prompt, &search).await?;
        if let Some(days) = recall::days_named(&prompt, self.inner.clock.today()) {
            let dated = SearchRequest { k: Some(DATED), dated: Some(days), ..search };
            let found: std::collections::HashSet<(String, DocKind)> =
                hits.iter().map(|h| (h.id.clone(), h.kind)).collect();
            let more = self.search(&prompt, &dated).await?;
            hits.extend(more.into_iter().filter(|h| !found.contains(&(h.id.clone(), h.kind))));
        }
        Ok(hits
            .into_iter()
            .filter(|h| past || h.kind != DocKind::History)
            .map(|h| Candidate {
                entry: h.kind != DocKind::Fact,
                until: h.valid_until.filter(|_| h.kind == DocKind::History),
                id: h.id,
                text: h.text,
                sources: h.sources,
                date: h.valid_from,
                similarity: h.similarity,
                score: h.score,
                space: h.space,
                related_to: h.related_to,
            })
            .collect())
    }

    /// How a recall chooses, from `[hooks]` and the embedder's calibration.
    pub fn recall_settings(&self) -> Settings {
        let hooks = &self.inner.config.hooks;
        Settings {
            bar: hooks.min_similarity.unwrap_or_else(|| {
                memfold_models::embed::recall_bar(&memfold_models::embed::chosen(&self.inner.config.embedding).0)
            }),
            min_score: hooks.prompt_min_score,
            gap: hooks.prompt_gap,
            words: hooks.prompt_words_weight,
            dates: hooks.prompt_dates_weight,
            max_lines: hooks.prompt_k,
            budget: hooks.prompt_max_chars,
            today: self.inner.clock.today(),
        }
    }
}
