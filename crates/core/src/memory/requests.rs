//! One request type per verb, as every door takes it: the HTTP API and the MCP tools
//! deserialise into these same types (an unknown field refused, naming it), the review page's
//! OpenAPI document (`/openapi.json`) and the MCP tools' input schemas are generated from them,
//! and the rules a request carries (give `with` or `text`, not both) are written here once.
//!
//! Where HTTP names the target in its path (`/entries/{id}/merge`), the path's id fills the
//! field of the same name (`id`, `plan`, `run`) and the body holds the rest.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::Error;
use crate::planning::curate::Successor;
use memfold_store::archive::NewFact;

/// A day as `YYYY-MM-DD`, refused with a message that shows what was given.
pub fn day<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<NaiveDate>, D::Error> {
    let text: Option<String> = Option::deserialize(deserializer)?;
    text.map(|t| t.parse().map_err(|_| serde::de::Error::custom(format!("expected a day as YYYY-MM-DD, got {t:?}"))))
        .transpose()
}

/// `POST /facts`, `memory_add`: facts to append to today's (or their day's) archive file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Add {
    /// The facts, each one self-contained sentence ("Moved to Lisbon in October."), as text or
    /// as `{"text", "date"?, "source"?}`.
    pub facts: Vec<FactInput>,
    /// The day the facts given as text belong to (YYYY-MM-DD); default today.
    #[serde(default, deserialize_with = "day")]
    pub date: Option<NaiveDate>,
    /// Where the facts given as text came from, stored with them (e.g. "chat").
    #[serde(default)]
    pub source: Option<String>,
}

/// One fact to add: its text, or its text with a day and a source of its own.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum FactInput {
    Text(String),
    Fact(FactItem),
}

/// A fact with its own day and source.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FactItem {
    pub text: String,
    /// YYYY-MM-DD; default the request's `date`, else today.
    #[serde(default, deserialize_with = "day")]
    pub date: Option<NaiveDate>,
    #[serde(default, alias = "src")]
    pub source: Option<String>,
}

/// A string or an object, each refused with its own message (an untagged enum would only say
/// that nothing matched).
impl<'de> Deserialize<'de> for FactInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(text) => Ok(FactInput::Text(text)),
            value @ serde_json::Value::Object(_) => {
                FactItem::deserialize(value).map(FactInput::Fact).map_err(serde::de::Error::custom)
            }
            other => {
                Err(serde::de::Error::custom(format!("a fact is a string or an object with \"text\", not {other}")))
            }
        }
    }
}

impl Add {
    /// A request for `facts`, each with its own day and source.
    pub fn of(facts: Vec<NewFact>) -> Add {
        let facts = facts
            .into_iter()
            .map(|f| FactInput::Fact(FactItem { text: f.text, date: f.date, source: f.source }))
            .collect();
        Add { facts, date: None, source: None }
    }

    /// The facts to append, each with its day and source (its own, else the request's).
    pub fn facts(self) -> Vec<NewFact> {
        let (date, source) = (self.date, self.source);
        self.facts
            .into_iter()
            .map(|fact| match fact {
                FactInput::Text(text) => NewFact { text, date, source: source.clone() },
                FactInput::Fact(item) => NewFact {
                    text: item.text,
                    date: item.date.or(date),
                    source: item.source.or_else(|| source.clone()),
                },
            })
            .collect()
    }
}

/// `GET /search`, `memory_search`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Search {
    /// What to look for, in words.
    #[serde(alias = "q")]
    pub query: String,
    /// How many hits (default search.default_k, at most 1000).
    #[serde(default)]
    pub k: Option<usize>,
    /// Show what was current on this day (YYYY-MM-DD).
    #[serde(default, deserialize_with = "day")]
    pub as_of: Option<NaiveDate>,
    /// Include superseded and removed versions.
    #[serde(default, alias = "include_history")]
    pub history: bool,
    /// `false`: do not record the hits in the recall log (a person browsing, not an agent
    /// recalling: `MEMORY.md` is promoted from what agents recall).
    #[serde(default)]
    pub recall: Option<bool>,
    /// Keep only hits at least this similar to the query (cosine, -1 to 1).
    #[serde(default)]
    pub min_similarity: Option<f64>,
}

impl Search {
    /// The query and how to search for it.
    pub fn split(self) -> (String, super::SearchRequest) {
        let request = super::SearchRequest {
            k: self.k,
            as_of: self.as_of,
            history: self.history,
            skip_recall: self.recall == Some(false),
            min_similarity: self.min_similarity,
            dated: None,
        };
        (self.query, request)
    }
}

/// `POST /recall` (the prompt hook): what an agent is handed for a prompt.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recall {
    /// The prompt, as the person wrote it.
    pub prompt: String,
    /// The agent (`claude-code`, `codex`) and its session id: an entry the session was told
    /// already, unchanged since, is not told again.
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    /// Characters, at most (default `hooks.prompt_max_chars`).
    #[serde(default)]
    pub budget: Option<usize>,
}

impl Recall {
    /// The session the prompt belongs to, as (agent, session id), when one was named.
    pub fn session(&self) -> Option<(String, String)> {
        match (&self.agent, &self.session) {
            (Some(agent), Some(session)) if !session.is_empty() => Some((agent.clone(), session.clone())),
            (None, Some(session)) if !session.is_empty() => Some(("agent".to_string(), session.clone())),
            _ => None,
        }
    }
}

/// `GET /about`, `memory_about`: the entries about a name; without one, the names.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct About {
    /// A person, pet, place or project ("Ana", "Rex", "Atlas"); none lists the names memory
    /// speaks of.
    #[serde(default)]
    pub name: Option<String>,
    /// Include versions that are no longer current.
    #[serde(default, alias = "include_history")]
    pub history: bool,
}

/// `POST /consolidate`, `memory_consolidate`.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Consolidate {
    /// Run even if fewer than consolidation.min_facts facts wait or the last pass was recent.
    #[serde(default)]
    pub force: bool,
    /// Decide and report the ops, write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// `POST /reindex`.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reindex {
    /// Drop the index and build it again from the files.
    #[serde(default)]
    pub clear: bool,
}

/// `POST /sweep`.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Every entry, not only those new or changed since the last sweep.
    #[serde(default)]
    pub full: bool,
    /// Find and report, store nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Only the entries unused for `decay.retire_after_days`.
    #[serde(default)]
    pub stale: bool,
}

/// One entry: `GET /entries/{id}`, `/history`, `/pin`, `/unpin`; `memory_get`, `memory_pin`,
/// `memory_unpin`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntryId {
    /// The entry id (m-…), as search and memory_get show it.
    pub id: String,
}

/// `DELETE /entries/{id}`, `memory_forget`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Forget {
    /// The entry id (m-…) or the id of a fact not yet consolidated (f-…).
    pub id: String,
    /// Why, kept with the tombstone.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /entries/{id}/share`, `memory_share`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Share {
    /// The entry id (m-…), as search and memory_get show it.
    pub id: String,
    /// The shared space to copy it into (one of the home's `[spaces]` shared).
    pub to: String,
}

/// `POST /entries/{id}/merge`, `memory_merge`: entries folded into one.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Merge {
    /// The entry that stays.
    pub id: String,
    /// The entries folded into it (one or more).
    pub with: Vec<String>,
    /// The merged text; absent: the LLM's when it keeps every detail, else the texts joined.
    #[serde(default)]
    pub text: Option<String>,
    /// Why, kept with the run.
    #[serde(default)]
    pub note: Option<String>,
}

impl Merge {
    /// Every entry of the merge, the one that stays first.
    pub fn ids(&self) -> Vec<String> {
        std::iter::once(self.id.clone()).chain(self.with.iter().cloned()).collect()
    }
}

/// `POST /entries/{id}/supersede`, `memory_supersede`: an entry out of date, and what takes
/// its place.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Supersede {
    /// The entry that is out of date.
    pub id: String,
    /// The entry that takes its place (or give text).
    #[serde(default)]
    pub with: Option<String>,
    /// Its new text (or give with).
    #[serde(default)]
    pub text: Option<String>,
    /// Why, kept with the run.
    #[serde(default)]
    pub note: Option<String>,
}

impl Supersede {
    /// What takes the entry's place: `with` or `text`, exactly one of them.
    pub fn successor(&self) -> Result<Successor, Error> {
        successor(self.with.clone(), self.text.clone())
    }
}

/// The successor `with` (an entry id) or `text` names: exactly one of them, whichever door
/// asked (the command line's flags, the review page's form, a request).
pub fn successor(with: Option<String>, text: Option<String>) -> Result<Successor, Error> {
    match (with, text) {
        (Some(with), None) => Ok(Successor::Entry(with)),
        (None, Some(text)) => Ok(Successor::Text(text)),
        (Some(_), Some(_)) => Err(Error::BadInput("give either \"with\" (an entry id) or \"text\", not both".into())),
        (None, None) => Err(Error::BadInput("give \"with\" (an entry id) or \"text\": what takes its place".into())),
    }
}

/// One plan: `GET /plans/{id}`, `memory_plan`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanId {
    /// The plan id, as memory_plans or memory_consolidate show it.
    pub plan: String,
}

/// `POST /plans/{id}/apply`, `memory_apply_plan`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Apply {
    /// The plan id, as memory_plans or memory_consolidate show it.
    pub plan: String,
    /// Apply only these op groups (numbered from 1, as memory_plan shows them) and reject the
    /// rest; all of them when absent.
    #[serde(default)]
    pub groups: Option<Vec<usize>>,
    /// Why, kept with the plan.
    #[serde(default)]
    pub note: Option<String>,
}

/// `POST /plans/{id}/reject`, `memory_reject_plan`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reject {
    /// The plan id, as memory_plans or memory_consolidate show it.
    pub plan: String,
    /// Why, kept with the plan.
    #[serde(default)]
    pub note: Option<String>,
}

/// One run: `GET /runs/{id}`, `memory_run`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunId {
    /// The run id, as memory_runs or memory_consolidate show it.
    pub run: String,
}

/// `POST /runs/{id}/undo`, `memory_undo`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoRun {
    /// The run id, as memory_runs or memory_consolidate show it.
    pub run: String,
    /// Undo only these ops (numbered from 1, as memory_run shows them).
    #[serde(default)]
    pub ops: Vec<usize>,
    /// Undo only these op groups (numbered from 1, as memory_run shows them).
    #[serde(default)]
    pub groups: Vec<usize>,
    /// Why, kept with the run.
    #[serde(default)]
    pub note: Option<String>,
}

impl UndoRun {
    /// What of the run to undo.
    pub fn what(self) -> super::Undo {
        super::Undo { ops: self.ops, groups: self.groups, note: self.note }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_come_as_text_or_objects_and_take_the_request_s_day_and_source() {
        let add: Add = serde_json::from_str(
            r#"{"facts": ["Has a dog.", {"text": "Moved.", "date": "2026-01-02"}], "date": "2026-03-04", "source": "chat"}"#,
        )
        .unwrap();
        let facts = add.facts();
        assert_eq!(facts[0].date, Some("2026-03-04".parse().unwrap()));
        assert_eq!(facts[1].date, Some("2026-01-02".parse().unwrap()));
        assert_eq!(facts[1].source.as_deref(), Some("chat"));
        let bad = serde_json::from_str::<Add>(r#"{"facts": [{"text": "x", "sorce": "y"}]}"#).unwrap_err().to_string();
        assert!(bad.contains("unknown field `sorce`"), "{bad}");
        let bad = serde_json::from_str::<Add>(r#"{"facts": [3]}"#).unwrap_err().to_string();
        assert!(bad.contains("a fact is a string or an object"), "{bad}");
    }

    #[test]
    fn old_spellings_are_read_and_unknown_fields_refused() {
        let search: Search = serde_json::from_str(r#"{"q": "dog", "include_history": true}"#).unwrap();
        assert_eq!((search.query.as_str(), search.history), ("dog", true));
        let bad = serde_json::from_str::<Search>(r#"{"query": "dog", "space": "other"}"#).unwrap_err().to_string();
        assert!(bad.contains("unknown field `space`"), "{bad}");
    }

    #[test]
    fn a_successor_is_an_entry_or_a_text_never_both() {
        assert!(matches!(successor(Some("m-1".into()), None), Ok(Successor::Entry(_))));
        assert!(matches!(successor(None, Some("t".into())), Ok(Successor::Text(_))));
        assert!(successor(Some("m-1".into()), Some("t".into())).is_err());
        assert!(successor(None, None).is_err());
    }
}
