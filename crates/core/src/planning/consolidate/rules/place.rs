//! Forming ops: each candidate joins, updates or adds, in order; drafts become proposed ops.

use std::collections::BTreeMap;

use chrono::NaiveDate;

use super::compare::*;
use super::normalise;
use super::text::*;
use crate::planning::run::ops::{Candidate, Neighbor, Op, ProposedOp};

pub(super) struct Cand<'a> {
    pub(super) c: &'a Candidate,
    pub(super) fact: Said,
}

impl Cand<'_> {
    pub(super) fn key(&self) -> (NaiveDate, bool, &str, &str) {
        (self.c.date, self.fact.has_marker(), &self.c.id, &self.c.text)
    }

    pub(super) fn body(&self) -> &str {
        strip_time(self.c.text.trim())
    }
}

pub(super) struct Neigh<'a> {
    pub(super) n: &'a Neighbor,
    pub(super) fact: Said,
    /// The current clause as a text of its own, when it differs from the whole content.
    pub(super) head: Option<Said>,
}

impl Neigh<'_> {
    pub(super) fn new(n: &Neighbor) -> Neigh<'_> {
        let fact = Said::new(&n.content);
        let head = fact.clause_text.as_deref().filter(|t| normalise(t) != fact.norm).map(Said::new);
        Neigh { n, fact, head }
    }

    pub(super) fn duplicate_of(&self, c: &Said) -> Dup {
        let whole = duplicate(c, &self.fact);
        match (whole, self.head.as_ref().map(|h| duplicate(c, h))) {
            (Dup::Same(s), _) => Dup::Same(s),
            (_, Some(Dup::Same(mut s))) => {
                s.push("current-clause");
                Dup::Same(s)
            }
            (Dup::Vetoed(mut v), Some(Dup::Vetoed(w))) => {
                v.extend(w.into_iter().filter(|x| !v.contains(x)).collect::<Vec<_>>());
                Dup::Vetoed(v)
            }
            (Dup::Vetoed(v), _) | (_, Some(Dup::Vetoed(v))) => Dup::Vetoed(v),
            _ => Dup::Different,
        }
    }
}

/// One op under construction.
#[derive(Debug, Default)]
pub(super) struct Draft {
    /// The neighbour this op is about (DUPLICATE, or REPLACE once it has statements); ADD when `None`.
    pub(super) target: Option<usize>,
    pub(super) facts: Vec<usize>,
    /// Candidates whose text makes up the content, oldest first; the last one is current.
    pub(super) statements: Vec<usize>,
    pub(super) signals: Vec<String>,
}

impl Draft {
    pub(super) fn render(&self, cands: &[Cand], neighs: &[Neigh]) -> ProposedOp {
        let facts = self.facts.iter().map(|&i| cands[i].c.id.clone()).collect();
        let statements: Vec<&Cand> = self.statements.iter().map(|&i| &cands[i]).collect();
        let op = match (self.target, statements.split_first()) {
            (Some(n), None) => Op::Duplicate { facts, target: neighs[n].n.id.clone() },
            (Some(n), Some(_)) => Op::Replace {
                target: neighs[n].n.id.clone(),
                facts,
                content: with_history(neighs[n].n.content.trim().to_string(), &statements),
                why: Some(
                    if statements.last().is_some_and(|c| c.fact.correction()) { "correction" } else { "update" }.into(),
                ),
            },
            (None, Some((first, rest))) => Op::Add { facts, content: with_history(first.body().to_string(), rest) },
            (None, None) => Op::Add { facts, content: String::new() },
        };
        let signals = if self.signals.is_empty() { vec!["no-match".to_string()] } else { self.signals.clone() };
        ProposedOp::with_signals(op, signals)
    }
}

/// `base` with each update laid over it, newest outermost.
pub(super) fn with_history(base: String, updates: &[&Cand]) -> String {
    updates.iter().fold(base, |previous, c| {
        let now = c.body().trim_end().trim_end_matches('.').trim_end();
        if c.fact.correction() {
            format!("{now} (previously recorded: {previous})")
        } else {
            format!("{now} (since {}); previously: {previous}", c.c.date)
        }
    })
}

/// Where a contradicted statement lives: a neighbour (and its op, if any) or an ADD draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Dest {
    Entry(usize),
    Draft(usize),
}

#[derive(Debug, Default)]
pub(super) struct Placement {
    pub(super) drafts: Vec<Draft>,
    /// The draft of each candidate placed so far (by sorted index).
    pub(super) owner: Vec<usize>,
    /// The draft of each neighbour that has one.
    pub(super) targets: BTreeMap<usize, usize>,
}

impl Placement {
    pub(super) fn join<S: Into<String>>(
        &mut self,
        d: usize,
        i: usize,
        statement: bool,
        signals: impl IntoIterator<Item = S>,
    ) {
        let draft = &mut self.drafts[d];
        draft.facts.push(i);
        if statement {
            draft.statements.push(i);
        }
        for s in signals.into_iter().map(Into::into) {
            if !draft.signals.contains(&s) {
                draft.signals.push(s);
            }
        }
        self.owner.push(d);
    }

    pub(super) fn add<S: Into<String>>(&mut self, i: usize, signals: impl IntoIterator<Item = S>) {
        self.drafts.push(Draft::default());
        self.join(self.drafts.len() - 1, i, true, signals);
    }

    pub(super) fn target(&mut self, n: usize) -> usize {
        if let Some(&d) = self.targets.get(&n) {
            return d;
        }
        self.drafts.push(Draft { target: Some(n), ..Draft::default() });
        self.targets.insert(n, self.drafts.len() - 1);
        self.drafts.len() - 1
    }

    /// Places candidate `i` (all earlier ones are placed).
    pub(super) fn place(&mut self, cands: &[Cand], neighs: &[Neigh], i: usize, today: NaiveDate) {
        let cand = &cands[i];
        let mut vetoes: Vec<String> = Vec::new();
        let mut note = |v: Vec<&'static str>| {
            for s in v {
                if !vetoes.iter().any(|x| x == s) {
                    vetoes.push(s.to_string());
                }
            }
        };
        for (n, nb) in neighs.iter().enumerate() {
            // A neighbour an earlier candidate already updates now says what that one says.
            let now_says = self.targets.get(&n).and_then(|&d| self.drafts[d].statements.last());
            let dup = match now_says {
                Some(&h) => duplicate(&cand.fact, &cands[h].fact),
                None => nb.duplicate_of(&cand.fact),
            };
            match dup {
                // A DUPLICATE only adds sources, which a pinned entry may gain too.
                Dup::Same(s) => {
                    let d = self.target(n);
                    return self.join(d, i, false, s);
                }
                Dup::Vetoed(v) => note(v),
                Dup::Different => {}
            }
        }
        for (j, earlier) in cands[..i].iter().enumerate() {
            match duplicate(&cand.fact, &earlier.fact) {
                Dup::Same(s) => return self.join(self.owner[j], i, false, s),
                Dup::Vetoed(v) => note(v),
                Dup::Different => {}
            }
        }
        let Some(clause) = &cand.fact.clause else {
            return self.add(i, std::iter::once("multi-clause".to_string()).chain(vetoes));
        };

        let mut hits: BTreeMap<Dest, Vec<String>> = BTreeMap::new();
        for (n, nb) in neighs.iter().enumerate() {
            if let Some(old) = &nb.fact.clause {
                let s = contradiction(old, clause);
                if !s.is_empty() {
                    hits.entry(Dest::Entry(n)).or_default().extend(s);
                }
            }
        }
        for (d, draft) in self.drafts.iter().enumerate() {
            if let Some(&h) = draft.statements.last()
                && let Some(old) = &cands[h].fact.clause
            {
                let s = contradiction(old, clause);
                if !s.is_empty() {
                    hits.entry(draft.target.map_or(Dest::Draft(d), Dest::Entry)).or_default().extend(s);
                }
            }
        }
        let mut blocked = Vec::new();
        let mut open = Vec::new();
        for (dest, mut s) in hits {
            let guard = match dest {
                Dest::Entry(n) if neighs[n].n.pinned => Some("pinned-target"),
                Dest::Entry(n) if cand.c.date < neighs[n].n.updated => Some("older-than-target"),
                _ if cand.c.date > today => Some("future-date"),
                _ => None,
            };
            match guard {
                Some(g) => {
                    s.push(g.to_string());
                    blocked.extend(s);
                }
                None => open.push((dest, s)),
            }
        }
        match open.as_slice() {
            [(dest, s)] => {
                let d = match *dest {
                    Dest::Entry(n) => self.target(n),
                    Dest::Draft(d) => d,
                };
                self.join(d, i, true, s.iter().cloned().chain(vetoes))
            }
            [] => self.add(i, blocked.into_iter().chain(vetoes)),
            _ => {
                let all = open.iter().flat_map(|(_, s)| s.iter().cloned());
                self.add(i, all.chain(["ambiguous-target".to_string()]).chain(blocked).chain(vetoes))
            }
        }
    }
}
