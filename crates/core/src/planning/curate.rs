//! Changes a person asks for by name (pure): merging entries into one, and superseding an
//! entry by another entry or by a new text.
//!
//! Each is a run of its own, planned with the ops a pass uses and committed like one: journal
//! lines, a run record (with the verb and the person's note), the old versions in `history.md`,
//! so `memfold undo RUN` takes it back and `verify` accounts for every fact it moves. Code owns
//! the provenance here as in a pass: the surviving entry takes the others' sources, the
//! earliest `first_seen` and the newest `updated`.
//!
//! - **merge** `A B …`: the others are folded into `A` (to history as `merged` into it) and `A`
//!   gets the merged text: the text given, else the LLM's when it keeps every entry's details,
//!   else the texts joined.
//! - **supersede** `OLD --with NEW`: `OLD` goes to history as `superseded` by `NEW`, which takes
//!   its sources; `--text T`: `OLD` gets the text `T`, its old version to history as replaced.
//!
//! A pinned entry is never merged or superseded, as consolidation never changes one.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::error::Error;
use crate::planning::consolidate::validate::dropped_details;
use crate::planning::run::apply::{self, Outcome};
use crate::planning::run::ops::{Op, ProposedOp};
use crate::planning::run::plan::{Plan, Planner};
use memfold_models::llm::Usage;
use memfold_store::Root;
use memfold_store::commit::Change;
use memfold_store::entries::{Entry, EntryFile, clean_content};
use memfold_store::ledger::Ledger;

/// Where the text of a merged entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TextFrom {
    /// The person gave it (`--text`).
    Given,
    /// The LLM wrote it and it keeps every entry's details.
    Llm,
    /// The entries' texts joined (no LLM, or its text dropped a detail).
    Joined,
}

/// What a merge or a supersession did.
#[derive(Debug, Clone, Serialize)]
pub struct Curated {
    /// The run it made: `memfold undo <run>` takes it back.
    pub run: String,
    pub verb: &'static str,
    /// The entry that is current now.
    pub entry: String,
    /// The entries that went to history.
    pub retired: Vec<String>,
    pub content: String,
    /// For a merge: where its text came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_from: Option<TextFrom>,
    /// Details of the entries (numbers, names, negations) the new text does not say: what
    /// the LLM's text dropped when it was set aside, or what a text given by hand leaves out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drops: Vec<String>,
    pub llm: Usage,
}

/// What a merge or supersession asks for, checked against `memory.md`.
pub struct Request<'a> {
    pub run: &'a str,
    pub note: Option<&'a str>,
    pub now: DateTime<Utc>,
    pub today: NaiveDate,
}

/// The current entries `ids` names, in order: each must exist, be named once and not be
/// pinned. A merge needs two at least.
pub fn mergeable<'m>(memory: &'m EntryFile, ids: &[String]) -> Result<Vec<&'m Entry>, Error> {
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for id in ids {
        if !seen.insert(id.as_str()) {
            return Err(Error::BadInput(format!("entry {id} is named twice")));
        }
        entries.push(current(memory, id)?);
    }
    if entries.len() < 2 {
        return Err(Error::BadInput("a merge takes two entries or more".into()));
    }
    Ok(entries)
}

fn current<'m>(memory: &'m EntryFile, id: &str) -> Result<&'m Entry, Error> {
    let entry = memory.get(id).ok_or_else(|| Error::not_found("entry", id))?;
    if entry.meta.pinned {
        return Err(Error::Conflict {
            message: format!("entry {id} is pinned; unpin it first (`memfold unpin {id}`) to merge or supersede it"),
            ids: vec![id.to_string()],
        });
    }
    Ok(entry)
}

/// The texts of `entries` as one: each as a sentence, in the order given, without repeats.
pub fn joined(entries: &[&Entry]) -> String {
    let mut seen = HashSet::new();
    let mut parts: Vec<String> = Vec::new();
    for e in entries {
        let text = e.content.trim();
        if text.is_empty() || !seen.insert(text.to_lowercase()) {
            continue;
        }
        let mut text = text.to_string();
        if !text.ends_with(['.', '!', '?']) {
            text.push('.');
        }
        parts.push(text);
    }
    parts.join(" ")
}

/// The details of `entries` a merged `text` does not say.
pub fn drops(text: &str, entries: &[&Entry]) -> Vec<String> {
    let texts: Vec<&str> = entries.iter().map(|e| e.content.as_str()).collect();
    dropped_details(text, None, &texts)
}

fn checked_text(text: &str) -> Result<String, Error> {
    let text = clean_content(text);
    if !text.chars().any(char::is_alphanumeric) {
        return Err(Error::BadInput("the new text is empty".into()));
    }
    Ok(text)
}

/// The change that merges `ids` into the first of them with `text` (see the module docs).
pub fn plan_merge(
    root: &Root,
    ledger: &Ledger,
    ids: &[String],
    text: &str,
    text_from: TextFrom,
    llm: Usage,
    request: &Request,
) -> Result<(Change, Curated), Error> {
    let entries = mergeable(&ledger.memory, ids)?;
    let text = checked_text(text)?;
    let drops = drops(&text, &entries);
    let survivor = entries[0].id().to_string();
    let why = why("merged by hand", request.note);
    let mut ops: Vec<ProposedOp> = entries[1..]
        .iter()
        .map(|e| hand_op(Op::Remove { target: e.id().to_string(), into: survivor.clone(), why: Some(why.clone()) }))
        .collect();
    if text != entries[0].content {
        ops.push(hand_op(Op::Replace {
            target: survivor.clone(),
            facts: Vec::new(),
            content: text.clone(),
            why: Some(why.clone()),
        }));
    }
    let facts = HashMap::new();
    let mut planner = Planner::new(ledger.memory.clone(), &facts, request.run.to_string(), request.now, request.today);
    planner.apply(&ops);
    let plan = finish(planner, ledger, "merge", request, llm);
    let change = commit_change(root, ledger, &plan, request);
    let retired = entries[1..].iter().map(|e| e.id().to_string()).collect();
    Ok((
        change,
        Curated {
            run: plan.run,
            verb: "merge",
            entry: survivor,
            retired,
            content: text,
            text_from: Some(text_from),
            drops,
            llm,
        },
    ))
}

/// What takes an entry's place in a supersession.
#[derive(Debug, Clone)]
pub enum Successor {
    /// Another current entry.
    Entry(String),
    /// A new text for the entry.
    Text(String),
}

/// The change that supersedes `old` (see the module docs).
pub fn plan_supersede(
    root: &Root,
    ledger: &Ledger,
    old: &str,
    by: &Successor,
    request: &Request,
) -> Result<(Change, Curated), Error> {
    let entry = current(&ledger.memory, old)?;
    let why = why("superseded by hand", request.note);
    let facts = HashMap::new();
    let mut planner = Planner::new(ledger.memory.clone(), &facts, request.run.to_string(), request.now, request.today);
    let (survivor, content) = match by {
        Successor::Entry(new) => {
            if new == old {
                return Err(Error::BadInput(format!("entry {old} cannot supersede itself")));
            }
            let next = ledger.memory.get(new).ok_or_else(|| Error::not_found("entry", new))?;
            let content = next.content.clone();
            planner.supersede(&hand_op(Op::Remove { target: old.to_string(), into: new.clone(), why: Some(why) }));
            (new.clone(), content)
        }
        Successor::Text(text) => {
            let text = checked_text(text)?;
            if text == entry.content {
                return Err(Error::BadInput(format!("entry {old} already says that")));
            }
            planner.apply(&[hand_op(Op::Replace {
                target: old.to_string(),
                facts: Vec::new(),
                content: text.clone(),
                why: Some(why),
            })]);
            (old.to_string(), text)
        }
    };
    let plan = finish(planner, ledger, "supersede", request, Usage::default());
    let change = commit_change(root, ledger, &plan, request);
    let retired = if survivor == old { Vec::new() } else { vec![old.to_string()] };
    Ok((
        change,
        Curated {
            run: plan.run,
            verb: "supersede",
            entry: survivor,
            retired,
            content,
            text_from: None,
            drops: Vec::new(),
            llm: Usage::default(),
        },
    ))
}

fn hand_op(op: Op) -> ProposedOp {
    ProposedOp::with_signals(op, vec!["by hand".into()])
}

fn why(what: &str, note: Option<&str>) -> String {
    match note.map(str::trim).filter(|n| !n.is_empty()) {
        Some(note) => format!("{what}: {note}"),
        None => what.to_string(),
    }
}

fn finish(planner: Planner, ledger: &Ledger, verb: &str, request: &Request, llm: Usage) -> Plan {
    let mut plan = planner.finish(ledger.memory.hash.clone());
    plan.verb = Some(verb.to_string());
    plan.note = request.note.map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
    plan.llm = llm;
    plan
}

fn commit_change(root: &Root, ledger: &Ledger, plan: &Plan, request: &Request) -> Change {
    let mut change = apply::change(root, ledger, plan, Outcome::default(), request.now, request.now, request.today);
    // The gate counts hours since the last pass; a change by hand is not one.
    if let Some(state) = change.state.as_mut() {
        state.last_run = ledger.state.last_run.clone();
    }
    change.label = format!("{} {}", plan.verb.as_deref().unwrap_or("change"), plan.run);
    change
}

/// The id of a run a person asked for: `r-<time>-<verb>-<hash of the entries>`.
pub fn run_id(now: DateTime<Utc>, verb: &str, ids: &[&str]) -> String {
    let hash = memfold_store::content_hash(format!("{now}\n{verb}\n{}", ids.join(",")));
    format!("r-{}-{verb}-{}", now.format("%Y%m%dT%H%M%SZ"), &hash[..4])
}
