//! Validation of a decider's ops against the cluster they were asked about, before anything is written.
//!
//! An invalid op is dropped whole, with a reason, never half-applied: targets must be
//! neighbours of this cluster and not pinned; an entry is changed by at most one REPLACE or
//! REMOVE; REMOVE must name a surviving `into`; facts must be candidates of this cluster, and
//! a fact is named by one ADD or one DUPLICATE only (a fact touching several entries may be
//! named by REPLACEs of each, as `prompts/consolidate.md` allows, but not also by an ADD or a
//! DUPLICATE); content must be non-empty, not a placeholder, and within the length bound. Every
//! candidate no accepted op names is then added verbatim ("default is keep, and add").

use std::collections::{HashMap, HashSet};

use crate::planning::run::ops::{ClusterDoc, Op, OpKind, ProposedOp, Related};

/// The most characters a link's `shares` keeps.
const MAX_SHARES: usize = 60;
use memfold_store::entries::clean_content;

/// Accepted ops (in reply order, then the verbatim ADDs) and dropped ones with reasons.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Validated {
    pub ops: Vec<ProposedOp>,
    pub dropped: Vec<(ProposedOp, String)>,
}

/// Words a model uses when it means "no new text".
const PLACEHOLDERS: &[&str] = &[
    "unchanged",
    "no change",
    "no changes",
    "same",
    "same as before",
    "keep",
    "n/a",
    "na",
    "none",
    "null",
    "tbd",
    "todo",
    "content",
    "<content>",
    "...",
    "…",
    "-",
    "(unchanged)",
    "[unchanged]",
    "see above",
    "as above",
];

/// An op's links: only to entries shown in this call, never to the op's own entry nor to one
/// an earlier op removes, and only from an op that leaves an entry (ADD, REPLACE, DUPLICATE).
/// A link refused is dropped from the op (which stands) and named in its signals.
fn check_links(proposed: &mut ProposedOp, neighbours: &HashMap<&str, bool>, removed: &HashSet<String>) {
    if proposed.related.is_empty() {
        return;
    }
    let target = proposed.op.target().map(str::to_string);
    let links = matches!(proposed.op, Op::Add { .. } | Op::Replace { .. } | Op::Duplicate { .. });
    let mut refused = Vec::new();
    let mut seen = HashSet::new();
    proposed.related.retain(|link| {
        let id = link.id();
        let why = if !links {
            Some(format!("{} leaves no entry to link", proposed.op.kind()))
        } else if target.as_deref() == Some(id) {
            Some("an entry is not linked to itself".to_string())
        } else if !neighbours.contains_key(id) {
            Some("not an entry shown in this call".to_string())
        } else if removed.contains(id) {
            Some("removed by an earlier op".to_string())
        } else {
            None
        };
        match why {
            Some(why) => {
                tracing::warn!(link = %id, reason = %why, "link refused");
                refused.push(format!("link to {id} refused: {why}"));
                false
            }
            None => seen.insert(id.to_string()),
        }
    });
    // What two entries share is a word or two; a longer text is no name and is left out.
    for link in &mut proposed.related {
        if link.shares().is_some_and(|s| s.chars().count() > MAX_SHARES || s.contains(['\n', '\r'])) {
            *link = Related::Id(link.id().to_string());
        }
    }
    proposed.signals.extend(refused);
}

fn check_content(content: &str, max_chars: usize) -> Result<String, String> {
    let cleaned = clean_content(content);
    let bare = cleaned.trim().trim_matches(|c: char| c == '.' || c == '"' || c == '\'').to_lowercase();
    if bare.is_empty() || !cleaned.chars().any(char::is_alphanumeric) {
        return Err("content is empty".into());
    }
    if PLACEHOLDERS.contains(&bare.as_str()) {
        return Err(format!("content {cleaned:?} is a placeholder"));
    }
    if cleaned.chars().count() > max_chars {
        return Err(format!("content has {} characters (max_content_chars = {max_chars})", cleaned.chars().count()));
    }
    Ok(cleaned)
}

/// The confidence of an op whose new text drops a detail (below any sensible
/// `review_below_confidence`, so it goes to review).
pub const DROPS_DETAIL: f64 = 0.2;

/// The details a text states that a rewrite must keep: numbers (years, amounts, times) and
/// names (capitalised words that do not start a sentence), lower-cased; and whether it has a
/// negation.
fn details(text: &str) -> (Vec<String>, Vec<String>, bool) {
    let (mut numbers, mut names) = (Vec::new(), Vec::new());
    let mut negated = false;
    let mut sentence_start = true;
    for raw in text.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let lower = word.to_lowercase();
        if matches!(lower.as_str(), "not" | "no" | "never" | "nor") || lower.ends_with("n't") {
            negated = true;
        }
        if word.chars().any(|c| c.is_ascii_digit()) {
            numbers.push(lower);
        } else if !sentence_start && word.chars().next().is_some_and(char::is_uppercase) && word.chars().count() > 1 {
            names.push(lower);
        }
        sentence_start = raw.ends_with(['.', '!', '?', ':', ';']);
    }
    numbers.dedup();
    names.dedup();
    (numbers, names, negated)
}

/// What `content` no longer says of the details a rewrite must keep ("2019", "ana", "a
/// negation"): every number, name and negation of its facts, but for the old values a fact
/// corrects ("John, not Jon"). What the entry said before stays in history; what the facts
/// say is the news, and a text that drops part of it loses it.
pub(crate) fn dropped_details(content: &str, entry: Option<&str>, facts: &[&str]) -> Vec<String> {
    let kept = content.to_lowercase();
    let kept_words: HashSet<&str> = kept.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let says = |detail: &str| {
        detail.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).all(|p| kept_words.contains(p))
    };
    let (_, _, now_negated) = details(content);
    let (old_numbers, old_names, _) = entry.map(details).unwrap_or_default();
    let mut dropped: Vec<String> = Vec::new();
    let mut drop = |d: String| {
        if !dropped.contains(&d) {
            dropped.push(d);
        }
    };
    for fact in facts {
        let (numbers, names, negated) = details(fact);
        let corrects = numbers.iter().chain(&names).any(|d| old_numbers.contains(d) || old_names.contains(d));
        for d in numbers.iter().chain(&names).filter(|d| !says(d) && !old_numbers.contains(d) && !old_names.contains(d))
        {
            drop(d.clone());
        }
        if negated && !now_negated && !corrects {
            drop("a negation".into());
        }
    }
    dropped
}

/// Send to review, with the reason, an op whose new text drops a number, date, name or
/// negation of the entry it rewrites or of its facts: a merged text keeps both sides' details.
/// A fact several ops of the reply name (one touching two entries) gives each only its part.
fn check_details(proposed: &mut ProposedOp, doc: &ClusterDoc, shared: &HashSet<String>) {
    let (content, target) = match &proposed.op {
        Op::Replace { content, target, .. } => (content, Some(target)),
        Op::Add { content, facts } if facts.len() > 1 => (content, None),
        _ => return,
    };
    let entry = target.and_then(|t| doc.neighbors.iter().find(|n| &n.id == t)).map(|n| n.content.as_str());
    let facts: Vec<&str> = proposed
        .op
        .facts()
        .iter()
        .filter(|f| !shared.contains(*f))
        .filter_map(|f| doc.candidates.iter().find(|c| &c.id == f).map(|c| c.text.as_str()))
        .collect();
    let dropped = dropped_details(content, entry, &facts);
    if dropped.is_empty() {
        return;
    }
    let why = format!(
        "drops {}",
        dropped
            .iter()
            .map(|d| if d == "a negation" { d.clone() } else { format!("\"{d}\"") })
            .collect::<Vec<_>>()
            .join(", ")
    );
    proposed.confidence = Some(proposed.confidence.map_or(DROPS_DETAIL, |c| c.min(DROPS_DETAIL)));
    proposed.signals.push(why);
}

/// What the ops of one reply accepted so far settle.
#[derive(Default)]
struct Accepted {
    /// Entries changed (REPLACE, REMOVE) by an accepted op.
    changed: HashSet<String>,
    /// Entries removed by an accepted op.
    removed: HashSet<String>,
    /// Entries an accepted REMOVE merged into.
    must_survive: HashSet<String>,
    /// Facts named by an accepted op, with the kind of the first one.
    used: HashMap<String, OpKind>,
}

impl Accepted {
    /// Why `op` cannot be applied after the ops accepted so far, if it cannot; its content is
    /// cleaned in place.
    fn check(
        &mut self,
        op: &mut Op,
        neighbours: &HashMap<&str, bool>,
        candidates: &HashSet<&str>,
        max_content_chars: usize,
    ) -> Result<(), String> {
        if let Some(unknown) = op.facts().iter().find(|f| !candidates.contains(f.as_str())) {
            return Err(format!("fact {unknown} is not a candidate of this cluster"));
        }
        // A fact goes into one ADD or one DUPLICATE; only REPLACEs of different entries may share it.
        let shares = matches!(op, Op::Replace { .. });
        if let Some((fact, by)) = op
            .facts()
            .iter()
            .find_map(|f| self.used.get(f.as_str()).filter(|by| !(shares && **by == OpKind::Replace)).map(|by| (f, by)))
        {
            return Err(format!("fact {fact} is already used by an earlier {by} in this reply"));
        }
        if let Some(target) = op.target() {
            match neighbours.get(target) {
                None => return Err(format!("target {target} is not a neighbour of this cluster")),
                // A DUPLICATE only adds sources, which a pinned entry may gain.
                Some(true) if !matches!(op, Op::Duplicate { .. }) => {
                    return Err(format!("target {target} is pinned"));
                }
                Some(_) => {}
            }
            if self.removed.contains(target) {
                return Err(format!("target {target} is removed by an earlier op"));
            }
        }
        match op {
            Op::Add { facts, content } => {
                if facts.is_empty() {
                    return Err("ADD names no facts".into());
                }
                *content = check_content(content, max_content_chars)?;
            }
            Op::Replace { target, content, .. } => {
                if self.changed.contains(target.as_str()) {
                    return Err(format!("{target} is already changed by an earlier op"));
                }
                *content = check_content(content, max_content_chars)?;
                self.changed.insert(target.clone());
            }
            Op::Remove { target, into, .. } => {
                if self.changed.contains(target.as_str()) || self.must_survive.contains(target.as_str()) {
                    return Err(format!("{target} is already changed or merged into by an earlier op"));
                }
                if into == target {
                    return Err(format!("{target} cannot be merged into itself"));
                }
                if !neighbours.contains_key(into.as_str()) || self.removed.contains(into.as_str()) {
                    return Err(format!("into {into} is not a surviving neighbour of this cluster"));
                }
                self.changed.insert(target.clone());
                self.removed.insert(target.clone());
                self.must_survive.insert(into.clone());
            }
            Op::Duplicate { facts, .. } => {
                if facts.is_empty() {
                    return Err("DUPLICATE names no facts".into());
                }
            }
            Op::Retire { .. } => return Err("RETIRE is not an op a decider may propose".into()),
            Op::Stale { .. } => return Err("STALE is not an op a decider may propose".into()),
        }
        Ok(())
    }
}

/// Validate `ops` for `doc`.
pub fn validate(doc: &ClusterDoc, ops: Vec<ProposedOp>, max_content_chars: usize) -> Validated {
    let neighbours: HashMap<&str, bool> = doc.neighbors.iter().map(|n| (n.id.as_str(), n.pinned)).collect();
    let candidates: HashSet<&str> = doc.candidates.iter().map(|c| c.id.as_str()).collect();
    let mut out = Validated::default();
    let mut accepted = Accepted::default();
    let mut named: HashMap<&str, usize> = HashMap::new();
    for fact in ops.iter().flat_map(|o| o.op.facts()) {
        *named.entry(fact.as_str()).or_default() += 1;
    }
    let shared: HashSet<String> = named.into_iter().filter(|(_, n)| *n > 1).map(|(f, _)| f.to_string()).collect();
    for mut proposed in ops {
        // A fact named twice in one op is one source.
        if let Op::Add { facts, .. } | Op::Replace { facts, .. } | Op::Duplicate { facts, .. } = &mut proposed.op {
            let mut seen = HashSet::new();
            facts.retain(|f| seen.insert(f.clone()));
        }
        let verdict = accepted.check(&mut proposed.op, &neighbours, &candidates, max_content_chars);
        match verdict {
            Ok(()) => {
                check_links(&mut proposed, &neighbours, &accepted.removed);
                check_details(&mut proposed, doc, &shared);
                for fact in proposed.op.facts() {
                    accepted.used.entry(fact.clone()).or_insert(proposed.op.kind());
                }
                out.ops.push(proposed)
            }
            Err(reason) => {
                tracing::warn!(op = %proposed.op.kind(), reason = %reason, "op dropped");
                out.dropped.push((proposed, reason));
            }
        }
    }
    let named: HashSet<String> = out.ops.iter().flat_map(|o| o.op.facts().iter().cloned()).collect();
    for candidate in doc.candidates.iter().filter(|c| !named.contains(&c.id)) {
        let op = Op::Add { facts: vec![candidate.id.clone()], content: clean_content(&candidate.text) };
        out.ops.push(ProposedOp::with_signals(op, vec!["unnamed-candidate".into()]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::run::ops::{Candidate, Neighbor};

    fn doc() -> ClusterDoc {
        let d = "2026-05-27".parse().unwrap();
        let n = |id: &str, pinned| Neighbor {
            id: id.into(),
            content: format!("{id} text"),
            first_seen: d,
            updated: d,
            pinned,
        };
        ClusterDoc {
            neighbors: vec![n("m-1", false), n("m-2", false), n("m-pin", true)],
            candidates: vec![
                Candidate { id: "f-1".into(), text: "Started at Microsoft".into(), date: d },
                Candidate { id: "f-2".into(), text: "Likes tea".into(), date: d },
            ],
        }
    }

    fn ops(json: &str) -> Vec<ProposedOp> {
        serde_json::from_str::<crate::planning::run::ops::OpsReply>(json).unwrap().ops
    }

    #[test]
    fn a_rewrite_that_drops_a_year_a_name_or_a_negation_goes_to_review_naming_it() {
        let mut doc = doc();
        doc.candidates[1].text = "Visited Rome with Ana in 2019; does not like flying.".into();
        let v = validate(
            &doc,
            ops(r#"{"ops":[{"op":"REPLACE","target":"m-1","facts":["f-2"],"content":"Visited Rome; likes flying."}]}"#),
            2000,
        );
        let op = &v.ops[0];
        assert_eq!(op.confidence, Some(DROPS_DETAIL));
        let why = op.signals.last().unwrap();
        assert!(why.contains("\"2019\"") && why.contains("\"ana\"") && why.contains("a negation"), "{why}");
        // A correction drops the value it corrects.
        doc.neighbors[0].content = "User's name is Jon".into();
        doc.candidates[0].text = "User's name is John, not Jon".into();
        let v = validate(
            &doc,
            ops(r#"{"ops":[{"op":"REPLACE","target":"m-1","facts":["f-1"],"content":"User's name is John."}]}"#),
            2000,
        );
        assert_eq!(v.ops[0].confidence, None, "{:?}", v.ops[0]);
        let v = validate(
            &doc,
            ops(
                r#"{"ops":[{"op":"REPLACE","target":"m-1","facts":["f-2"],"content":"Visited Rome with Ana in 2019; does not like flying."}]}"#,
            ),
            2000,
        );
        assert_eq!(v.ops[0].confidence, None, "every detail kept: {:?}", v.ops[0]);
    }

    #[test]
    fn target_outside_the_cluster_is_dropped_and_its_fact_added_verbatim() {
        let v = validate(
            &doc(),
            ops(r#"{"ops":[{"op":"REPLACE","target":"m-999","facts":["f-1"],"content":"x y"}]}"#),
            2000,
        );
        assert_eq!(v.dropped.len(), 1);
        assert!(v.dropped[0].1.contains("not a neighbour"));
        let added: Vec<_> = v.ops.iter().map(|o| (o.op.kind().as_str(), o.op.facts().to_vec())).collect();
        assert_eq!(added, [("ADD", vec!["f-1".to_string()]), ("ADD", vec!["f-2".to_string()])]);
    }

    #[test]
    fn a_fact_named_twice_in_one_op_is_one_source() {
        let v = validate(
            &doc(),
            ops(r#"{"ops":[{"op":"ADD","facts":["f-1","f-2","f-1"],"content":"x y"},
                          {"op":"DUPLICATE","facts":[],"target":"m-1"}]}"#),
            2000,
        );
        assert_eq!(v.ops.len(), 1, "{:?}", v.dropped);
        assert_eq!(v.ops[0].op.facts(), ["f-1", "f-2"]);
    }

    #[test]
    fn a_decider_may_not_retire_an_entry() {
        let v = validate(&doc(), ops(r#"{"ops":[{"op":"RETIRE","target":"m-1"}]}"#), 2000);
        assert!(v.ops.iter().all(|o| o.op.kind() != OpKind::Retire), "{:?}", v.ops);
        assert!(v.dropped[0].1.contains("RETIRE is not an op a decider may propose"), "{:?}", v.dropped);
    }

    #[test]
    fn pinned_entries_are_never_replaced_or_removed() {
        let v = validate(
            &doc(),
            ops(r#"{"ops":[{"op":"REPLACE","target":"m-pin","facts":["f-2"],"content":"New text"}]}"#),
            2000,
        );
        assert!(v.dropped[0].1.contains("pinned"));
        let v = validate(&doc(), ops(r#"{"ops":[{"op":"REMOVE","target":"m-pin","into":"m-1"}]}"#), 2000);
        assert!(v.dropped[0].1.contains("pinned"));
        let v = validate(&doc(), ops(r#"{"ops":[{"op":"DUPLICATE","target":"m-pin","facts":["f-2"]}]}"#), 2000);
        assert!(v.dropped.is_empty(), "a pinned entry may gain sources");
    }

    #[test]
    fn placeholder_and_empty_content_are_refused() {
        for content in ["unchanged", "  ", "...", "(unchanged)", "Same."] {
            let json =
                format!(r#"{{"ops":[{{"op":"REPLACE","target":"m-1","facts":["f-1"],"content":{content:?}}}]}}"#);
            let v = validate(&doc(), ops(&json), 2000);
            assert_eq!(v.dropped.len(), 1, "{content:?} accepted");
        }
        let v = validate(&doc(), ops(r#"{"ops":[{"op":"ADD","facts":["f-2"],"content":"aaaaaaaaaa"}]}"#), 5);
        assert!(v.dropped[0].1.contains("max_content_chars"));
    }

    #[test]
    fn removing_everything_keeps_a_survivor() {
        let v = validate(
            &doc(),
            ops(r#"{"ops":[{"op":"REMOVE","target":"m-1","into":"m-2"},{"op":"REMOVE","target":"m-2","into":"m-1"}]}"#),
            2000,
        );
        assert_eq!(v.ops.iter().filter(|o| o.op.kind() == OpKind::Remove).count(), 1);
        assert_eq!(v.dropped.len(), 1);
    }

    #[test]
    fn one_change_per_entry() {
        let v = validate(
            &doc(),
            ops(
                r#"{"ops":[{"op":"REPLACE","target":"m-1","facts":["f-1"],"content":"A b"},{"op":"REPLACE","target":"m-1","facts":["f-2"],"content":"C d"}]}"#,
            ),
            2000,
        );
        assert_eq!(v.dropped.len(), 1);
        assert_eq!(v.ops.len(), 2, "the second fact is added verbatim");
    }

    #[test]
    fn unknown_fact_drops_the_op() {
        let v = validate(
            &doc(),
            ops(r#"{"ops":[{"op":"ADD","facts":["f-1","f-zzz"],"content":"Works at Microsoft"}]}"#),
            2000,
        );
        assert!(v.dropped[0].1.contains("f-zzz"));
    }

    #[test]
    fn a_fact_may_feed_replaces_of_two_entries() {
        let v = validate(
            &doc(),
            ops(
                r#"{"ops":[{"op":"REPLACE","target":"m-1","facts":["f-1"],"content":"Works at Microsoft"},{"op":"REPLACE","target":"m-2","facts":["f-1"],"content":"Commutes to the Microsoft office"},{"op":"ADD","facts":["f-2"],"content":"Likes tea"}]}"#,
            ),
            2000,
        );
        assert!(v.dropped.is_empty(), "{:?}", v.dropped);
        assert_eq!(v.ops.len(), 3);
    }

    #[test]
    fn three_adds_of_one_fact_make_one_entry() {
        let add = r#"{"op":"ADD","facts":["f-1"],"content":"Works at Microsoft"}"#;
        let v = validate(&doc(), ops(&format!(r#"{{"ops":[{add},{add},{add}]}}"#)), 2000);
        let kinds: Vec<_> = v.ops.iter().map(|o| (o.op.kind().as_str(), o.op.facts().to_vec())).collect();
        assert_eq!(kinds, [("ADD", vec!["f-1".to_string()]), ("ADD", vec!["f-2".to_string()])]);
        assert_eq!(v.dropped.len(), 2);
        assert!(v.dropped.iter().all(|(_, why)| why == "fact f-1 is already used by an earlier ADD in this reply"));
    }

    #[test]
    fn a_fact_used_once_is_not_used_again_by_another_kind_of_op() {
        for (first, second) in [
            (
                r#"{"op":"ADD","facts":["f-1"],"content":"Works at Microsoft"}"#,
                r#"{"op":"REPLACE","target":"m-2","facts":["f-1"],"content":"Commutes to Microsoft"}"#,
            ),
            (
                r#"{"op":"ADD","facts":["f-1"],"content":"Works at Microsoft"}"#,
                r#"{"op":"DUPLICATE","target":"m-1","facts":["f-1"]}"#,
            ),
            (
                r#"{"op":"DUPLICATE","target":"m-1","facts":["f-1"]}"#,
                r#"{"op":"ADD","facts":["f-1","f-2"],"content":"Works at Microsoft, likes tea"}"#,
            ),
            (
                r#"{"op":"REPLACE","target":"m-1","facts":["f-1"],"content":"Works at Microsoft"}"#,
                r#"{"op":"ADD","facts":["f-1"],"content":"Works at Microsoft"}"#,
            ),
            (
                r#"{"op":"REPLACE","target":"m-1","facts":["f-1"],"content":"Works at Microsoft"}"#,
                r#"{"op":"DUPLICATE","target":"m-2","facts":["f-1"]}"#,
            ),
        ] {
            let v = validate(&doc(), ops(&format!(r#"{{"ops":[{first},{second}]}}"#)), 2000);
            assert_eq!(v.dropped.len(), 1, "{second} after {first}");
            assert!(v.dropped[0].1.starts_with("fact f-1 is already used by an earlier"), "{}", v.dropped[0].1);
        }
        // A dropped op uses nothing up.
        let v = validate(
            &doc(),
            ops(
                r#"{"ops":[{"op":"ADD","facts":["f-1"],"content":"..."},{"op":"ADD","facts":["f-1"],"content":"Works at Microsoft"}]}"#,
            ),
            2000,
        );
        assert_eq!((v.ops.len(), v.dropped.len()), (2, 1));
    }
}
