//! The plan: validated ops applied to an in-memory copy of `memory.md`, with history blocks and journal records.
//!
//! Planning is pure: it never touches disk. Code sets all provenance here —
//! `first_seen` is the earliest source date, `updated` the newest, `sources` the union — and
//! the decider's text only ever becomes content. The calls of a pass are decided one after
//! another against the planner's current state, so a later call sees the earlier calls' results:
//! an entry shows its current text, and an entry merged away shows as the entry it was merged
//! into ([`Planner::resolve`]).
//!
//! A pass looks entries up once per op and per neighbour, tens of thousands of times against
//! tens of thousands of entries, so the planner keeps an id → position map of `memory.md`
//! instead of searching the file, and removes entries from the file only at [`Planner::finish`].

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use super::ops::{Candidate, ClusterDoc, Neighbor, Op, ProposedOp};
use crate::planning::consolidate::pack::Packing;
use memfold_models::llm::Usage;
use memfold_store::archive::Fact;
use memfold_store::content_hash;
use memfold_store::entries::{Entry, EntryFile, EntryMeta, HistoryStatus, Item};

/// An entry's text before and after one op (rendered blocks; None = absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub entry: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// One line of `.memfold/journal.jsonl`: an applied op and what it changed, enough to undo it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalRecord {
    pub run: String,
    pub seq: usize,
    pub time: DateTime<Utc>,
    #[serde(flatten)]
    pub op: ProposedOp,
    pub changes: Vec<Change>,
}

/// Everything a pass would write.
#[derive(Debug, Clone)]
pub struct Plan {
    pub run: String,
    /// Hash of `memory.md` as read; the write is refused if it changed since.
    pub memory_hash_before: String,
    pub memory_before: String,
    pub memory_after: String,
    /// Old versions to append to `history.md`.
    pub history: Vec<Entry>,
    pub journal: Vec<JournalRecord>,
    /// Facts the applied ops account for.
    pub facts_done: BTreeSet<String>,
    /// Entries added, changed or removed.
    pub touched: BTreeSet<String>,
    /// What deciding the plan cost (recorded with the run).
    pub llm: Usage,
    /// The stored plan (`.memfold/plans/`) this was loaded from, if any.
    pub from_plan: Option<String>,
    /// How the pass that made the plan packed its facts into decision calls.
    pub packing: Option<Packing>,
    /// The verb of a change a person asked for by name (`merge`, `supersede`), and their note.
    pub verb: Option<String>,
    pub note: Option<String>,
    /// Why the stored plan this applies was held (with `from_plan`).
    pub plan_reason: Option<super::records::PlanReason>,
    /// Who decided the stored plan this applies.
    pub decider: Option<memfold_store::caches::DeciderKind>,
}

/// One entry's net change over a list of journal records: its first `before` and last `after`.
#[derive(Debug, Clone, PartialEq)]
pub struct NetChange {
    pub entry: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// The net change of every entry the records touch, in the order first touched.
pub fn net_changes<'r>(records: impl IntoIterator<Item = &'r JournalRecord>) -> Vec<NetChange> {
    let mut out: Vec<NetChange> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for change in records.into_iter().flat_map(|r| &r.changes) {
        match at.get(&change.entry) {
            Some(&i) => out[i].after = change.after.clone(),
            None => {
                at.insert(change.entry.clone(), out.len());
                out.push(NetChange {
                    entry: change.entry.clone(),
                    before: change.before.clone(),
                    after: change.after.clone(),
                });
            }
        }
    }
    out
}

/// Builds a plan op by op.
pub struct Planner<'a> {
    run: String,
    today: NaiveDate,
    now: DateTime<Utc>,
    facts: &'a HashMap<String, Fact>,
    memory: EntryFile,
    /// Positions in `memory.items` of each current entry, in file order (an id written twice
    /// by hand has two; the first one is the entry, as with [`EntryFile::get`]).
    at: HashMap<String, Vec<usize>>,
    /// Positions of entries removed so far; they leave `memory.items` at `finish`.
    removed: BTreeSet<usize>,
    /// Fact id → (journal seq, entry id) of each entry an op naming that fact added or changed.
    made: HashMap<String, Vec<(usize, String)>>,
    /// Entry id → the entry it was merged into by a REMOVE.
    merged: HashMap<String, String>,
    memory_before: String,
    history: Vec<Entry>,
    journal: Vec<JournalRecord>,
    facts_done: BTreeSet<String>,
    touched: BTreeSet<String>,
}

impl<'a> Planner<'a> {
    /// A planner over `memory`. `now` stamps the journal; `today` dates new versions (from the
    /// one [`memfold_store::sys::clock::Clock`]).
    pub fn new(
        memory: EntryFile,
        facts: &'a HashMap<String, Fact>,
        run: String,
        now: DateTime<Utc>,
        today: NaiveDate,
    ) -> Planner<'a> {
        let memory_before = memory.render();
        let mut at: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, item) in memory.items.iter().enumerate() {
            if let Item::Entry(e) = item {
                at.entry(e.id().to_string()).or_default().push(i);
            }
        }
        Planner {
            run,
            today,
            now,
            facts,
            memory,
            at,
            removed: BTreeSet::new(),
            made: HashMap::new(),
            merged: HashMap::new(),
            memory_before,
            history: Vec::new(),
            journal: Vec::new(),
            facts_done: BTreeSet::new(),
            touched: BTreeSet::new(),
        }
    }

    /// The current entry with this id.
    fn get(&self, id: &str) -> Option<&Entry> {
        match self.memory.items.get(*self.at.get(id)?.first()?)? {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        }
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Entry> {
        match self.memory.items.get_mut(*self.at.get(id)?.first()?)? {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        }
    }

    fn push(&mut self, entry: Entry) {
        self.at.entry(entry.id().to_string()).or_default().push(self.memory.items.len());
        self.memory.push(entry);
    }

    fn remove(&mut self, id: &str) {
        let Some(positions) = self.at.get_mut(id) else { return };
        if !positions.is_empty() {
            self.removed.insert(positions.remove(0));
        }
        if positions.is_empty() {
            self.at.remove(id);
        }
    }

    /// The id an entry goes by now: itself while current, the entry it was merged into (followed
    /// to the end) after a REMOVE, `None` when it is gone.
    pub fn resolve<'b>(&'b self, mut id: &'b str) -> Option<&'b str> {
        // A merge chain is at most as long as the number of REMOVEs; the bound only guards
        // against a cycle, which validation already rules out.
        for _ in 0..=self.merged.len() {
            if self.get(id).is_some() {
                return Some(id);
            }
            id = self.merged.get(id)?;
        }
        None
    }

    /// Current entries that ops naming any of the facts in `from` added or changed, newest first,
    /// each once.
    pub fn entries_from(&self, from: &BTreeSet<&str>) -> Vec<String> {
        let mut made: Vec<&(usize, String)> = from.iter().filter_map(|f| self.made.get(*f)).flatten().collect();
        made.sort_by_key(|m| std::cmp::Reverse(m.0));
        let mut seen = BTreeSet::new();
        made.into_iter()
            .filter_map(|(_, id)| self.resolve(id))
            .filter(|id| seen.insert(*id))
            .map(str::to_string)
            .collect()
    }

    /// The decision document for these facts and entries, as things stand now: each entry as
    /// [`Planner::resolve`] finds it, each once, in the order given.
    pub fn doc(&self, facts: &[String], entries: &[String]) -> ClusterDoc {
        let mut seen = BTreeSet::new();
        let neighbors = entries
            .iter()
            .filter_map(|id| self.resolve(id))
            .filter(|id| seen.insert(*id))
            .filter_map(|id| self.get(id))
            .map(|e| neighbor(e, self.today))
            .collect();
        let mut candidates: Vec<Candidate> = facts
            .iter()
            .filter_map(|id| self.facts.get(id))
            .map(|f| Candidate { id: f.id.clone(), text: f.text.clone(), date: f.date })
            .collect();
        candidates.sort_by(|a, b| (a.date, &a.id).cmp(&(b.date, &b.id)));
        ClusterDoc { neighbors, candidates }
    }

    fn dates(&self, facts: &[String]) -> (Option<NaiveDate>, Option<NaiveDate>) {
        let dates = facts.iter().filter_map(|f| self.facts.get(f)).map(|f| f.date);
        (dates.clone().min(), dates.max())
    }

    fn record(&mut self, op: &ProposedOp, changes: Vec<Change>) {
        let seq = self.journal.len();
        for c in &changes {
            self.touched.insert(c.entry.clone());
            if c.after.is_some() {
                for fact in op.op.facts() {
                    self.made.entry(fact.clone()).or_default().push((seq, c.entry.clone()));
                }
            }
        }
        self.facts_done.extend(op.op.facts().iter().cloned());
        self.journal.push(JournalRecord { run: self.run.clone(), seq, time: self.now, op: op.clone(), changes });
    }

    /// `old`'s version goes to history with `status`, leading to `superseded_by` if anything.
    fn retire(&mut self, old: &Entry, status: HistoryStatus, superseded_by: Option<&str>, valid_until: NaiveDate) {
        let mut meta = old.meta.clone();
        meta.valid_until = Some(valid_until);
        meta.superseded_by = superseded_by.map(str::to_string);
        meta.status = Some(status);
        meta.run = Some(self.run.clone());
        meta.first_seen = meta.first_seen.or(meta.updated);
        self.history.push(Entry::new(meta, &old.content));
    }

    /// Apply already-validated ops.
    pub fn apply(&mut self, ops: &[ProposedOp]) {
        for op in ops {
            let recorded = self.journal.len();
            self.apply_one(op);
            if !op.related.is_empty() && self.journal.len() > recorded {
                let subject = match &op.op {
                    Op::Add { .. } => self.journal.last().and_then(|r| r.changes.first()).map(|c| c.entry.clone()),
                    other => other.target().map(str::to_string),
                };
                if let Some(subject) = subject {
                    self.link(&subject, op);
                }
            }
        }
    }

    /// Link `subject` and each entry `op` names as related, both ways (an entry merged away
    /// since the call is followed to the one it went into); the changes join the op's record.
    fn link(&mut self, subject: &str, op: &ProposedOp) {
        for related in &op.related {
            let Some(other) = self.resolve(related.id()).map(str::to_string) else { continue };
            if other == subject {
                continue;
            }
            let shares = related.shares();
            self.change_meta(subject, |meta| meta.link(&other, shares));
            self.change_meta(&other, |meta| meta.link(subject, shares));
        }
    }

    /// Change `id`'s metadata with `change` (which says whether it changed anything), and
    /// record it in the last record: its `after` where the record already changes `id`, else a
    /// change of its own.
    fn change_meta(&mut self, id: &str, change: impl FnOnce(&mut EntryMeta) -> bool) {
        let Some(entry) = self.get(id) else { return };
        let mut meta = entry.meta.clone();
        if !change(&mut meta) {
            return;
        }
        let before = entry.render();
        let after = self.replace_meta(id, meta);
        self.touched.insert(id.to_string());
        let Some(record) = self.journal.last_mut() else { return };
        match record.changes.iter_mut().find(|c| c.entry == id) {
            Some(existing) => existing.after = after,
            None => record.changes.push(Change { entry: id.to_string(), before: Some(before), after }),
        }
    }

    /// The entries linked to `old` (which leaves the file) follow it into `to`, or drop the
    /// link (`None`).
    fn relink(&mut self, old: &Entry, to: Option<&str>) {
        for link in old.meta.links() {
            if Some(link.id.as_str()) == to {
                continue;
            }
            // One change of the linked entry: its link moved (or, where a hand edit left it
            // one-sided, made).
            let shares = link.shares.as_deref();
            self.change_meta(&link.id, |meta| meta.relink(old.id(), to) | to.is_some_and(|to| meta.link(to, shares)));
            if let Some(to) = to {
                self.change_meta(to, |meta| meta.link(&link.id, shares));
            }
        }
    }

    fn apply_one(&mut self, op: &ProposedOp) {
        match &op.op {
            Op::Add { facts, content } => {
                let (first, last) = self.dates(facts);
                let id = self.new_id(facts, content);
                let meta = EntryMeta {
                    first_seen: first.or(Some(self.today)),
                    updated: last.or(Some(self.today)),
                    sources: facts.clone(),
                    ..EntryMeta::new(id.clone())
                };
                let entry = Entry::new(meta, content);
                let after = Some(entry.render());
                self.push(entry);
                self.record(op, vec![Change { entry: id, before: None, after }]);
            }
            Op::Replace { target, facts, content, .. } => {
                let (first, last) = self.dates(facts);
                let today = self.today;
                let Some(old) = self.get(target).cloned() else { return };
                let mut meta = old.meta.clone();
                meta.sources = union(&meta.sources, facts);
                meta.first_seen = min_date(meta.first_seen, first);
                meta.updated = Some(match (meta.updated, last) {
                    (Some(a), Some(b)) => a.max(b),
                    (a, b) => b.or(a).unwrap_or(today),
                });
                let valid_until = meta.updated.unwrap_or(today);
                self.retire(&old, HistoryStatus::Replaced, Some(target), valid_until);
                let new = Entry::new(meta, content);
                let after = Some(new.render());
                if let Some(slot) = self.get_mut(target) {
                    *slot = new;
                }
                self.record(op, vec![Change { entry: target.clone(), before: Some(old.render()), after }]);
            }
            Op::Remove { target, into, .. } => self.fold(op, target, into, HistoryStatus::Merged),
            // An entry that leaves with nothing to fold into: taken back by an undo elsewhere
            // (its facts pending again), or retired for disuse (its facts stay accounted for).
            Op::Retire { target, .. } | Op::Stale { target, .. } => {
                let Some(old) = self.get(target).cloned() else { return };
                let status = match op.op {
                    Op::Stale { .. } => HistoryStatus::Retired,
                    _ => HistoryStatus::Reverted,
                };
                self.retire(&old, status, None, self.today);
                self.remove(target);
                self.record(op, vec![Change { entry: target.clone(), before: Some(old.render()), after: None }]);
                self.relink(&old, None);
            }
            Op::Duplicate { facts, target } => {
                let Some(old) = self.get(target).cloned() else { return };
                let (first, _) = self.dates(facts);
                let mut meta = old.meta.clone();
                meta.sources = union(&meta.sources, facts);
                meta.first_seen = min_date(meta.first_seen, first);
                let after = self.replace_meta(target, meta);
                self.record(op, vec![Change { entry: target.clone(), before: Some(old.render()), after }]);
            }
        }
    }

    /// A REMOVE that a person asked for as a supersession: `old` leaves for history as
    /// `superseded` by `by`, which takes its sources, as a REMOVE's survivor does.
    pub fn supersede(&mut self, op: &ProposedOp) {
        if let Op::Remove { target, into, .. } = &op.op {
            self.fold(op, target, into, HistoryStatus::Superseded);
        }
    }

    /// `target` leaves the file for history with `status`, folded into `into`: the survivor
    /// takes its sources, its earliest `first_seen` and its newest `updated`.
    fn fold(&mut self, op: &ProposedOp, target: &str, into: &str, status: HistoryStatus) {
        let (Some(old), Some(survivor)) = (self.get(target).cloned(), self.get(into).cloned()) else {
            return;
        };
        self.retire(&old, status, Some(into), self.today);
        self.remove(target);
        if self.get(target).is_none() {
            self.merged.insert(target.to_string(), into.to_string());
        }
        let mut meta = survivor.meta.clone();
        meta.sources = union(&meta.sources, &old.meta.sources);
        meta.first_seen = min_date(meta.first_seen, old.meta.first_seen);
        meta.updated = meta.updated.max(old.meta.updated);
        meta.relink(target, None);
        let after = self.replace_meta(into, meta);
        self.record(
            op,
            vec![
                Change { entry: target.to_string(), before: Some(old.render()), after: None },
                Change { entry: into.to_string(), before: Some(survivor.render()), after },
            ],
        );
        // What was linked to the entry that leaves is linked to the one it went into.
        self.relink(&old, Some(into));
    }

    fn replace_meta(&mut self, id: &str, meta: EntryMeta) -> Option<String> {
        let entry = self.get_mut(id)?;
        entry.meta = meta;
        entry.touch();
        Some(entry.render())
    }

    fn new_id(&self, facts: &[String], content: &str) -> String {
        let mut sorted = facts.to_vec();
        sorted.sort();
        let hash = content_hash(format!("{}\n{content}", sorted.join(",")));
        (8..=hash.len())
            .map(|n| format!("m-{}", &hash[..n]))
            .find(|id| self.get(id).is_none())
            .unwrap_or_else(|| format!("m-{hash}-{}", self.journal.len()))
    }

    pub fn finish(mut self, memory_hash_before: String) -> Plan {
        // From the back, so the positions still to remove stay where they were.
        for &at in self.removed.iter().rev() {
            self.memory.remove_item(at);
        }
        self.memory.assign_headers();
        Plan {
            run: self.run,
            memory_hash_before,
            memory_before: self.memory_before,
            memory_after: self.memory.render(),
            history: self.history,
            journal: self.journal,
            facts_done: self.facts_done,
            touched: self.touched,
            llm: Usage::default(),
            from_plan: None,
            packing: None,
            verb: None,
            note: None,
            plan_reason: None,
            decider: None,
        }
    }
}

/// An entry as a decision document shows it; `today` stands in for dates it lacks.
pub fn neighbor(e: &Entry, today: NaiveDate) -> Neighbor {
    Neighbor {
        id: e.id().to_string(),
        content: e.content.clone(),
        first_seen: e.meta.first_seen.or(e.meta.updated).unwrap_or(today),
        updated: e.meta.updated.or(e.meta.first_seen).unwrap_or(today),
        pinned: e.meta.pinned,
    }
}

fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    for x in b {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

fn min_date(a: Option<NaiveDate>, b: Option<NaiveDate>) -> Option<NaiveDate> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(id: &str, date: &str, text: &str) -> (String, Fact) {
        (id.into(), Fact::sample(id, date, text))
    }

    fn now() -> DateTime<Utc> {
        "2026-06-01T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn replace_keeps_provenance_and_history() {
        let facts: HashMap<_, _> =
            [fact("f-g", "2026-05-27", "Works at Google"), fact("f-m", "2026-05-30", "Started at Microsoft")].into();
        let mut planner = Planner::new(EntryFile::default(), &facts, "r-1".into(), now(), now().date_naive());
        planner.apply(&[ProposedOp::new(Op::Add { facts: vec!["f-g".into()], content: "Works at Google.".into() })]);
        let id = planner.journal[0].changes[0].entry.clone();
        planner.apply(&[ProposedOp::new(Op::Replace {
            target: id.clone(),
            facts: vec!["f-m".into()],
            content: "Currently works at Microsoft (since 2026-05). Previously worked at Google.".into(),
            why: Some("update".into()),
        })]);
        let plan = planner.finish(content_hash(""));
        let memory = EntryFile::parse(&plan.memory_after, "memory.md");
        let e = memory.get(&id).unwrap();
        assert_eq!(e.meta.sources, ["f-g", "f-m"]);
        assert_eq!(e.meta.first_seen, Some("2026-05-27".parse().unwrap()));
        assert_eq!(e.meta.updated, Some("2026-05-30".parse().unwrap()));
        assert_eq!(plan.history.len(), 1);
        let old = &plan.history[0].meta;
        assert_eq!(
            (old.status.as_ref(), old.superseded_by.as_deref()),
            (Some(&HistoryStatus::Replaced), Some(id.as_str()))
        );
        assert_eq!(old.valid_until, Some("2026-05-30".parse().unwrap()));
        assert_eq!(plan.journal.len(), 2);
        assert_eq!(plan.facts_done.len(), 2);
    }

    #[test]
    fn remove_merges_sources_into_the_survivor() {
        let facts: HashMap<_, _> = [fact("f-1", "2026-05-01", "a"), fact("f-2", "2026-05-02", "b")].into();
        let mut planner = Planner::new(EntryFile::default(), &facts, "r-1".into(), now(), now().date_naive());
        planner.apply(&[
            ProposedOp::new(Op::Add { facts: vec!["f-1".into()], content: "Likes tea.".into() }),
            ProposedOp::new(Op::Add { facts: vec!["f-2".into()], content: "Enjoys tea.".into() }),
        ]);
        let ids: Vec<String> = planner.journal.iter().map(|r| r.changes[0].entry.clone()).collect();
        planner.apply(&[ProposedOp::new(Op::Remove { target: ids[1].clone(), into: ids[0].clone(), why: None })]);
        let plan = planner.finish(content_hash(""));
        let memory = EntryFile::parse(&plan.memory_after, "memory.md");
        assert_eq!(memory.entries().count(), 1);
        assert_eq!(memory.get(&ids[0]).unwrap().meta.sources, ["f-1", "f-2"]);
        assert_eq!(plan.history[0].meta.status, Some(HistoryStatus::Merged));
    }

    #[test]
    fn entries_from_lists_what_ops_of_those_facts_made_newest_first_and_follows_merges() {
        let facts: HashMap<_, _> =
            [fact("f-1", "2026-05-01", "a"), fact("f-2", "2026-05-02", "b"), fact("f-3", "2026-05-03", "c")].into();
        let mut planner = Planner::new(EntryFile::default(), &facts, "r-1".into(), now(), now().date_naive());
        planner.apply(&[
            ProposedOp::new(Op::Add { facts: vec!["f-1".into()], content: "Oldest.".into() }),
            ProposedOp::new(Op::Add { facts: vec!["f-1".into(), "f-2".into()], content: "From both.".into() }),
            ProposedOp::new(Op::Add { facts: vec!["f-3".into()], content: "Not asked for.".into() }),
            ProposedOp::new(Op::Add { facts: vec!["f-2".into()], content: "Newest.".into() }),
        ]);
        let ids: Vec<String> = planner.journal.iter().map(|r| r.changes[0].entry.clone()).collect();
        let from: BTreeSet<&str> = ["f-1", "f-2"].into();
        assert_eq!(planner.entries_from(&from), [ids[3].clone(), ids[1].clone(), ids[0].clone()]);
        planner.apply(&[ProposedOp::new(Op::Duplicate { facts: vec!["f-1".into()], target: ids[2].clone() })]);
        assert_eq!(planner.entries_from(&from)[0], ids[2], "a DUPLICATE names its target too");
        planner.apply(&[ProposedOp::new(Op::Remove { target: ids[3].clone(), into: ids[1].clone(), why: None })]);
        assert_eq!(planner.resolve(&ids[3]), Some(ids[1].as_str()));
        assert_eq!(planner.entries_from(&from), [ids[2].clone(), ids[1].clone(), ids[0].clone()]);
        let doc = planner.doc(&["f-2".into()], &[ids[3].clone(), ids[1].clone(), "m-gone".into()]);
        let shown: Vec<&str> = doc.neighbors.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(shown, [ids[1].as_str()], "a merged entry shows as its survivor, once; an unknown id not at all");
        assert_eq!(doc.neighbors[0].content, "From both.");
    }

    #[test]
    fn an_id_written_twice_by_hand_is_found_again_after_its_first_copy_is_removed() {
        let text = "<!--m {\"id\":\"m-a\"}-->\nFirst copy.\n\n<!--m {\"id\":\"m-a\"}-->\nSecond copy.\n\n<!--m {\"id\":\"m-b\"}-->\nOther.\n";
        let memory = EntryFile::parse(text, "memory.md");
        let facts = HashMap::new();
        let mut planner = Planner::new(memory, &facts, "r-1".into(), now(), now().date_naive());
        planner.apply(&[ProposedOp::new(Op::Remove { target: "m-a".into(), into: "m-b".into(), why: None })]);
        assert_eq!(planner.get("m-a").map(|e| e.content.as_str()), Some("Second copy."));
        let plan = planner.finish(content_hash(text));
        let after = EntryFile::parse(&plan.memory_after, "memory.md");
        let contents: Vec<&str> = after.entries().map(|e| e.content.as_str()).collect();
        assert_eq!(contents, ["Second copy.", "Other."]);
    }
}
