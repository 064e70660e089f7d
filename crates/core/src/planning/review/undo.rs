//! The run log, and undoing a run: byte for byte from its copy of `memory.md` when nothing
//! changed since, else entry by entry from its journal.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};

use super::reports::{RunDetail, RunView, Undone};
use super::{MEMORY, block_entry};
use crate::error::Error;
use crate::planning::run::plan::{JournalRecord, NetChange, net_changes};
use crate::planning::run::records::{self, OpsUndo, RunRecord, UndoRecord};
use memfold_models::llm::Usage;
use memfold_store::commit::{Change, EntryDelta, HistoryWrite, MemoryWrite};
use memfold_store::entries::{Entry, EntryFile, EntryMeta, HistoryStatus, Item};
use memfold_store::ledger::{FactFate, Ledger};
use memfold_store::{Root, content_hash};

/// Applied runs, oldest first: every run in the journal, with its run record where there is one.
pub fn runs(root: &Root) -> Result<Vec<RunView>, Error> {
    let mut by_run: BTreeMap<String, RunView> = BTreeMap::new();
    let mut facts: HashMap<String, BTreeSet<String>> = HashMap::new();
    // The entries each run lists, to keep its list free of repeats in linear time.
    let mut listed: HashSet<(String, String)> = HashSet::new();
    for r in records::journal_lines(root)? {
        let view = by_run.entry(r.run.clone()).or_insert_with(|| RunView {
            run: r.run.clone(),
            time: r.time,
            started: None,
            plan: None,
            ops: BTreeMap::new(),
            facts: 0,
            entries: Vec::new(),
            llm: None,
            undone: None,
            undone_ops: Vec::new(),
            verb: None,
            notes: Vec::new(),
        });
        *view.ops.entry(r.op).or_default() += 1;
        for c in r.changes {
            if listed.insert((r.run.clone(), c.entry.clone())) {
                view.entries.push(c.entry);
            }
        }
        facts.entry(r.run).or_default().extend(r.facts);
    }
    for (run, view) in by_run.iter_mut() {
        view.facts = facts.get(run).map_or(0, BTreeSet::len);
        if let Some(record) = records::read_json::<records::RunHead>(root, &records::run_path(root, run))? {
            view.time = record.finished;
            view.started = Some(record.started);
            view.plan = record.plan;
            view.facts = record.facts.len();
            view.llm = Some(record.llm);
            view.verb = record.verb;
            view.notes.extend(record.note.map(|n| format!("run: {n}")));
            view.undone_ops = record.undone_ops.iter().flat_map(|u| u.ops.iter().map(|s| s + 1)).collect();
            for u in &record.undone_ops {
                if let Some(n) = &u.undo.note {
                    let ops: Vec<String> = u.ops.iter().map(|s| (s + 1).to_string()).collect();
                    view.notes.push(format!("undo of op {}: {n}", ops.join(",")));
                }
            }
            view.notes.extend(record.undone.as_ref().and_then(|u| u.note.clone()).map(|n| format!("undo: {n}")));
            view.undone = record.undone.map(|u| u.time);
        }
    }
    let mut runs: Vec<RunView> = by_run.into_values().collect();
    runs.sort_by(|a, b| (a.time, &a.run).cmp(&(b.time, &b.run)));
    Ok(runs)
}

/// One applied run with its ops in groups, as [`super::plan_detail`] shows a plan's.
pub fn run_detail(root: &Root, run: &str) -> Result<RunDetail, Error> {
    records::check_id("run", run)?;
    let view = runs(root)?.into_iter().find(|r| r.run == run).ok_or_else(|| Error::not_found("run", run))?;
    let mut journal: Vec<JournalRecord> = records::journal(root)?.into_iter().filter(|r| r.run == run).collect();
    journal.sort_by_key(|r| r.seq);
    let groups = super::plans::op_groups(&journal)
        .into_iter()
        .enumerate()
        .map(|(n, ops)| super::plans::group_view(n + 1, ops.iter().map(|&i| &journal[i]), &[], &BTreeSet::new()))
        .collect();
    Ok(RunDetail { run: view, groups })
}

/// The journal `seq`s of the ops `--op` (1-based op numbers) and `--group` (1-based, as
/// [`run_detail`] numbers them) name in `run`.
pub fn undo_selection(
    journal: &[JournalRecord],
    run: &str,
    ops: &[usize],
    groups: &[usize],
) -> Result<BTreeSet<usize>, Error> {
    let mut journal: Vec<JournalRecord> = journal.iter().filter(|r| r.run == run).cloned().collect();
    journal.sort_by_key(|r| r.seq);
    if journal.is_empty() {
        return Err(Error::not_found("run", run));
    }
    let mut seqs: BTreeSet<usize> = BTreeSet::new();
    for &op in ops {
        if op == 0 || op > journal.len() {
            return Err(Error::BadInput(format!("run {run} has ops 1 to {}; there is no op {op}", journal.len())));
        }
        seqs.insert(journal[op - 1].seq);
    }
    let all = super::plans::op_groups(&journal);
    // The ops of a group change the same facts or entries together (a merge's REPLACE and its
    // REMOVEs): undoing some of them would leave the rest pointing at what was taken back, and
    // a fact said by no current entry. A group is undone whole or not at all.
    for group in &all {
        let chosen: Vec<usize> = group.iter().filter(|&&i| seqs.contains(&journal[i].seq)).map(|&i| i + 1).collect();
        let whole = groups.iter().any(|&g| all.get(g.wrapping_sub(1)) == Some(group));
        if !chosen.is_empty() && chosen.len() < group.len() && !whole {
            let number = all.iter().position(|g| g == group).map_or(0, |p| p + 1);
            let members: Vec<String> =
                group.iter().map(|&i| format!("{} ({})", i + 1, journal[i].op.op.label())).collect();
            let mut ids: Vec<String> =
                group.iter().filter_map(|&i| journal[i].op.op.target().map(str::to_string)).collect();
            ids.dedup();
            return Err(Error::Conflict {
                message: format!(
                    "op {} of run {run} is one of the {} ops of group {number}, which change the same facts or \
                     entries together: {}. Undo the whole group (--group {number}) or none of it; nothing was undone",
                    chosen.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                    group.len(),
                    members.join(", ")
                ),
                ids,
            });
        }
    }
    for &g in groups {
        let group = all.get(g.wrapping_sub(1)).ok_or_else(|| {
            Error::BadInput(format!("run {run} has groups 1 to {}; there is no group {g}", all.len()))
        })?;
        seqs.extend(group.iter().map(|&i| journal[i].seq));
    }
    if seqs.is_empty() {
        return Err(Error::BadInput("name an op (--op N) or a group (--group N) to undo".into()));
    }
    Ok(seqs)
}

/// Which ops of a run an undo takes back, and why.
#[derive(Debug, Clone, Default)]
pub struct UndoScope<'a> {
    /// Journal `seq`s of the ops to undo; None: the whole run (what is left of it).
    pub ops: Option<&'a BTreeSet<usize>>,
    pub note: Option<&'a str>,
}

/// The change that undoes `run`, or the ops of it `scope` names (see the module docs), given
/// the root's ledger, its journal and the run's record. Refused, with the ids in the way, when
/// an entry the ops touched has changed since (a later run, a later op of the same run, or a
/// person).
pub fn plan_undo(
    ledger: &Ledger,
    journal: &[JournalRecord],
    record: Option<RunRecord>,
    run: &str,
    scope: UndoScope,
    now: DateTime<Utc>,
    today: NaiveDate,
) -> Result<(Change, Undone), Error> {
    let (records, undone_before) = to_undo(journal, record.as_ref(), run, scope.ops)?;
    let changes = net_changes(records.iter().copied());
    check_unchanged(ledger, &changes, run)?;
    // Byte for byte only for a whole run, with the copy at hand: old records have had theirs dropped.
    let exact = scope.ops.is_none()
        && undone_before.is_empty()
        && record.as_ref().is_some_and(|r| {
            !r.memory_hash_after.is_empty() && r.memory_hash_after == ledger.memory.hash && r.has_copy()
        });
    let before_file = record.as_ref().map(|r| EntryFile::parse(&r.memory_before, MEMORY));
    let put_back = put_back(&ledger.memory, &changes, before_file.as_ref());
    let new_text = match (&record, exact) {
        (Some(r), true) => r.memory_before.clone(),
        _ => put_back.memory.render(),
    };
    let history = history_after_undo(&ledger.history, &changes, run, scope.ops.is_some(), today);
    let after = Ledger { memory: EntryFile::parse(&new_text, MEMORY), history, ..ledger.clone() };
    // Facts the undone ops consumed that no longer live on in current memory.
    let fates = after.fates();
    let run_facts: BTreeSet<&str> = records.iter().flat_map(|r| r.op.op.facts().iter().map(String::as_str)).collect();
    let facts: Vec<String> =
        run_facts.into_iter().filter(|f| fates.get(f) == Some(&FactFate::Pending)).map(str::to_string).collect();
    let mut state = ledger.state.clone();
    for fact in &facts {
        state.facts.entry(fact.clone()).or_default().reverted_run = Some(run.to_string());
    }
    let pending: HashSet<&str> = after.pending().into_iter().map(|f| f.id.as_str()).collect();
    state.watermark = ledger.watermark(&pending, today);
    state.file_hashes.insert(MEMORY.into(), content_hash(&new_text));

    let label = match scope.ops {
        Some(ops) => format!("undo {run} op {}", ops.iter().map(|s| (s + 1).to_string()).collect::<Vec<_>>().join(",")),
        None => format!("undo {run}"),
    };
    let mut change = Change::new(label);
    let by_id: std::collections::HashMap<&str, &Entry> = after.memory.entries().map(|e| (e.id(), e)).collect();
    let entries = changes
        .iter()
        .map(|c| {
            let now_there = by_id.get(c.entry.as_str()).map(|e| e.render());
            EntryDelta::of(&c.entry, c.after.as_deref(), now_there.as_deref())
        })
        .collect();
    change.memory = Some(MemoryWrite { before: ledger.memory.hash.clone(), text: new_text, entries });
    change.history = Some(HistoryWrite::Rewrite { before: ledger.history.hash.clone(), text: after.history.render() });
    change.state = Some(state);
    let PutBack { restored, removed, .. } = put_back;
    let all: Vec<&JournalRecord> = journal.iter().filter(|r| r.run == run).collect();
    let mut record = record.unwrap_or_else(|| RunRecord::legacy(run, &all));
    let note = scope.note.map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
    let undo = UndoRecord {
        time: now,
        exact,
        restored: restored.clone(),
        removed: removed.clone(),
        facts: facts.clone(),
        note,
    };
    let ops: Vec<usize> = records.iter().map(|r| r.seq).collect();
    match scope.ops {
        Some(_) => record.undone_ops.push(OpsUndo { ops: ops.clone(), undo }),
        None => record.undone = Some(undo),
    }
    change.records.push(record.file());
    let ops = if scope.ops.is_some() { ops.iter().map(|s| s + 1).collect() } else { Vec::new() };
    Ok((change, Undone { run: run.to_string(), exact, restored, removed, facts, ops, llm: Usage::default() }))
}

/// The journal records of `run` an undo takes back (all not undone yet, or the ops `ops`
/// names, in order), and the ops undone before; refused when the run is unknown or what it
/// would take back was undone already.
fn to_undo<'a>(
    journal: &'a [JournalRecord],
    record: Option<&RunRecord>,
    run: &str,
    ops: Option<&BTreeSet<usize>>,
) -> Result<(Vec<&'a JournalRecord>, BTreeSet<usize>), Error> {
    let mut records: Vec<&JournalRecord> = journal.iter().filter(|r| r.run == run).collect();
    records.sort_by_key(|r| r.seq);
    if records.is_empty() && record.is_none() {
        return Err(Error::not_found("run", run));
    }
    if let Some(done) = record.and_then(|r| r.undone.as_ref()) {
        return Err(Error::Conflict {
            message: format!("run {run} was undone already, at {}", done.time.to_rfc3339()),
            ids: vec![run.to_string()],
        });
    }
    let undone_before: BTreeSet<usize> =
        record.iter().flat_map(|r| &r.undone_ops).flat_map(|u| u.ops.iter().copied()).collect();
    if let Some(ops) = ops {
        let known: BTreeSet<usize> = records.iter().map(|r| r.seq).collect();
        if let Some(missing) = ops.iter().find(|s| !known.contains(s)) {
            return Err(Error::BadInput(format!("run {run} has no op {} (it has {})", missing + 1, records.len())));
        }
        if let Some(again) = ops.iter().find(|s| undone_before.contains(s)) {
            return Err(Error::Conflict {
                message: format!("op {} of run {run} was undone already", again + 1),
                ids: vec![run.to_string()],
            });
        }
        records.retain(|r| ops.contains(&r.seq));
    } else {
        records.retain(|r| !undone_before.contains(&r.seq));
        if records.is_empty() && !undone_before.is_empty() {
            return Err(Error::Conflict {
                message: format!("every op of run {run} was undone already"),
                ids: vec![run.to_string()],
            });
        }
    }
    Ok((records, undone_before))
}

/// Refuse an undo when an entry `run` touched is no longer as the run left it, naming them.
fn check_unchanged(ledger: &Ledger, changes: &[NetChange], run: &str) -> Result<(), Error> {
    let by_id: std::collections::HashMap<&str, &Entry> = ledger.memory.entries().map(|e| (e.id(), e)).collect();
    let conflicts: Vec<String> = changes
        .iter()
        .filter(|c| by_id.get(c.entry.as_str()).map(|e| e.render()) != c.after)
        .map(|c| c.entry.clone())
        .collect();
    if conflicts.is_empty() {
        return Ok(());
    }
    Err(Error::Conflict {
        message: format!(
            "entries run {run} touched have changed since ({}); undo refused and nothing was changed. \
             Undo the later runs first, or edit these entries by hand",
            conflicts.join(", ")
        ),
        ids: conflicts,
    })
}

/// `memory.md` with the entries a run changed put back: its additions removed, the versions it
/// replaced or removed restored (a removed one where it stood in `before`, the run's copy).
struct PutBack {
    memory: EntryFile,
    restored: Vec<String>,
    removed: Vec<String>,
}

fn put_back(memory: &EntryFile, changes: &[NetChange], before: Option<&EntryFile>) -> PutBack {
    let mut memory = memory.clone();
    let (mut restored, mut removed) = (Vec::new(), Vec::new());
    let mut versions: HashMap<String, Entry> = HashMap::new();
    let mut returning: Vec<Entry> = Vec::new();
    for c in changes {
        let old = c.before.as_deref().and_then(block_entry);
        match (old, c.after.is_some()) {
            (None, true) => {
                memory.remove(&c.entry);
                removed.push(c.entry.clone());
            }
            (Some(old), true) => {
                versions.insert(c.entry.clone(), old);
                restored.push(c.entry.clone());
            }
            (Some(old), false) => {
                returning.push(old);
                restored.push(c.entry.clone());
            }
            (None, false) => {}
        }
    }
    // One pass over the file, however many entries the run changed (a run that retired 50,000
    // entries put back one by one read the whole file each time).
    for entry in memory.entries_mut() {
        if let Some(old) = versions.remove(entry.id()) {
            *entry = old;
        }
    }
    reinsert_all(&mut memory, returning, before);
    PutBack { memory, restored, removed }
}

/// `history.md` after undoing `run`: the undone versions appended as `reverted`, and the run's
/// copies of the versions now current again marked `restored` (neither kind leads anywhere).
fn history_after_undo(
    history: &EntryFile,
    changes: &[NetChange],
    run: &str,
    part: bool,
    today: NaiveDate,
) -> EntryFile {
    let mut history = history.clone();
    // Undoing part of a run: only the run's copies of the versions these ops put back.
    let put_back: HashSet<(String, String)> = changes
        .iter()
        .filter_map(|c| c.before.as_deref().and_then(block_entry).map(|e| (c.entry.clone(), e.content)))
        .collect();
    for block in history.entries_mut().filter(|e| {
        e.meta.run.as_deref() == Some(run)
            && e.meta.status.as_ref().is_some_and(HistoryStatus::leads_on)
            && (!part || put_back.contains(&(e.id().to_string(), e.content.clone())))
    }) {
        block.meta.status = Some(HistoryStatus::Restored);
        block.touch();
    }
    for c in changes {
        let Some(after) = c.after.as_deref().and_then(block_entry) else { continue };
        let mut meta: EntryMeta = after.meta.clone();
        meta.status = Some(HistoryStatus::Reverted);
        meta.valid_until = Some(today);
        meta.run = Some(run.to_string());
        meta.superseded_by = c.before.is_some().then(|| c.entry.clone());
        meta.first_seen = meta.first_seen.or(meta.updated);
        history.push(Entry::new(meta, &after.content));
    }
    history
}

/// Put an entry the run removed back where it stood before the run (after the nearest earlier
/// entry that is still there), or at the end.
#[cfg(test)]
pub(super) fn reinsert(memory: &mut EntryFile, entry: Entry, before: Option<&EntryFile>) {
    reinsert_all(memory, vec![entry], before);
}

/// Put entries the run removed back where they stood before the run: each after the nearest
/// earlier entry of `before` that is still there (entries put back after the same one in their
/// order in `before`), else before the nearest later one, else at the end. One pass.
pub(super) fn reinsert_all(memory: &mut EntryFile, entries: Vec<Entry>, before: Option<&EntryFile>) {
    if entries.is_empty() {
        return;
    }
    let Some(before) = before else {
        entries.into_iter().for_each(|e| memory.push(e));
        return;
    };
    let order: Vec<&str> = before.entries().map(Entry::id).collect();
    let at: HashMap<&str, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let present: HashSet<&str> = memory.entries().map(Entry::id).collect();
    // The nearest present entry before and after each place of `before`.
    let mut earlier: Vec<Option<usize>> = vec![None; order.len()];
    let mut last = None;
    for (i, id) in order.iter().enumerate() {
        earlier[i] = last;
        if present.contains(id) {
            last = Some(i);
        }
    }
    let mut later: Vec<Option<usize>> = vec![None; order.len()];
    let mut next = None;
    for (i, id) in order.iter().enumerate().rev() {
        later[i] = next;
        if present.contains(id) {
            next = Some(i);
        }
    }
    let mut after_it: HashMap<String, Vec<(usize, Entry)>> = HashMap::new();
    let mut before_it: HashMap<String, Vec<(usize, Entry)>> = HashMap::new();
    let mut at_end: Vec<Entry> = Vec::new();
    for entry in entries {
        match at.get(entry.id()).copied() {
            Some(p) => match (earlier[p], later[p]) {
                (Some(a), _) => after_it.entry(order[a].to_string()).or_default().push((p, entry)),
                (None, Some(b)) => before_it.entry(order[b].to_string()).or_default().push((p, entry)),
                (None, None) => at_end.push(entry),
            },
            None => at_end.push(entry),
        }
    }
    let items = std::mem::take(&mut memory.items);
    let mut out = Vec::with_capacity(items.len() + after_it.len() + before_it.len());
    let sorted = |mut list: Vec<(usize, Entry)>| {
        list.sort_by_key(|(p, _)| *p);
        list.into_iter().map(|(_, e)| Item::Entry(e))
    };
    for item in items {
        let id = match &item {
            Item::Entry(e) => Some(e.id().to_string()),
            Item::Trivia(_) => None,
        };
        if let Some(list) = id.as_deref().and_then(|id| before_it.remove(id)) {
            out.extend(sorted(list));
        }
        out.push(item);
        if let Some(list) = id.as_deref().and_then(|id| after_it.remove(id)) {
            out.extend(sorted(list));
        }
    }
    memory.items = out;
    at_end.into_iter().for_each(|e| memory.push(e));
}
