//! Merging a root with another machine's copy of it (`memfold sync`): pure, from three versions
//! of each file (the last synced one, this machine's, the other's) to one [`Change`].
//!
//! A file changed on one side only takes that side's bytes. Changed on both, memfold merges it
//! by what it holds:
//!
//! - archive day files: every fact the other side has and this one lacks (by fact id) is
//!   appended, as its line was written there. A day file changed only there takes its bytes
//!   when they hold every fact this one has (so both machines end with the same file), under
//!   the day file's lock; otherwise what it lacks is appended. No fact ever leaves a day file;
//! - `.memfold/tombstones.jsonl`: the union of the lines;
//! - `consolidated/memory.md`: three-way by entry id. An entry changed on one side takes that
//!   side's version; changed on both, the later `updated` stays current, the other version goes
//!   to `history.md` and a plan for review brings it back if a person says so; removed on one
//!   side and changed on the other, the changed version stays current (nothing is lost
//!   meanwhile) and the plan removes it as that side did: a REMOVE into the entry it was
//!   folded into there, or a RETIRE when an undo took it back (its facts pending again);
//! - `history.md`: this side's blocks, less those the other side took back since the last sync
//!   (an undo re-marks blocks), plus the blocks the other side added;
//! - `MEMORY.md`: the lines a person wrote on either side; memfold's own lines are this side's
//!   until the next promotion rewrites them.
//!
//! Nothing else is ever written: a path the other side has that is not one of these
//! ([`allowed`]: the day files by their name, the four files above) is left alone and named
//! in the report (`refused`), whatever it is (`memfold.toml`, `.memfold/…`, `.git/…`, `..`).
//! Tombstones only grow and an archived fact's text never changes: a day file on the other
//! side that says a fact differently is refused, naming the line. Facts that come from the
//! other machine are held to this machine's `ingest.secrets` before they are appended.
//!
//! Then, whatever the files said: an entry a tombstone names, or that names a tombstoned fact,
//! leaves `memory.md` for `history.md` (a fact deleted on one machine is deleted on both; the
//! entry's other facts are pending again for the next pass).

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::planning::consolidate::divert;
use crate::planning::run::ops::{Op, ProposedOp};
use crate::planning::run::plan::Planner;
use crate::planning::run::records::PlanReason;
use memfold_store::archive::{self, Fact};
use memfold_store::commit::{Change, EntryDelta, FileWrite, HistoryWrite, MemoryWrite};
use memfold_store::config::SecretsPolicy;
use memfold_store::entries::{Entry, EntryFile, HistoryStatus, Item};
use memfold_store::ledger::{Ledger, Tombstoned};
use memfold_store::promoted;
use memfold_store::secrets;
use memfold_store::state::Tombstone;
use memfold_store::{Problem, content_hash};

pub const MEMORY: &str = "consolidated/memory.md";
pub const HISTORY: &str = "consolidated/history.md";
pub const TOMBSTONES: &str = ".memfold/tombstones.jsonl";
pub const PROMOTED: &str = "MEMORY.md";

/// Whether a sync may write `path` (relative to the root, `/`-separated, as git names it):
/// one of memfold's four merged files, or an archive day file named by its date
/// (`archive/YYYY-MM-DD.md`). Nothing else a remote's tree holds is ever read or written here.
pub fn allowed(path: &str) -> bool {
    [MEMORY, HISTORY, TOMBSTONES, PROMOTED].contains(&path) || day_of(path).is_some()
}

/// One file as it was at the last sync, is here, and is on the other machine (None: absent).
#[derive(Debug, Clone, Default)]
pub struct Side {
    pub base: Option<String>,
    pub ours: Option<String>,
    pub theirs: Option<String>,
}

impl Side {
    fn ours(&self) -> &str {
        self.ours.as_deref().unwrap_or("")
    }
    fn base(&self) -> &str {
        self.base.as_deref().unwrap_or("")
    }
}

/// What a merge is made from.
pub struct Request<'a> {
    /// This root as read under the lock.
    pub ledger: &'a Ledger,
    /// Every file whose version differs between the sides, by path relative to the root, and
    /// always `memory.md`, `history.md`, `MEMORY.md` and the tombstones.
    pub files: &'a BTreeMap<String, Side>,
    /// The other machine's version, as people read it in reasons ("origin/main 1a2b3c4").
    pub other: &'a str,
    /// The id of the review plan, if the merge makes one.
    pub run: &'a str,
    pub now: DateTime<Utc>,
    pub today: NaiveDate,
    /// This machine's `ingest.secrets`, which facts from the other machine are held to.
    pub secrets: SecretsPolicy,
}

/// How an entry's two versions disagreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// Changed on both machines: the later `updated` stays current.
    ChangedOnBoth,
    /// Removed here, changed on the other machine: the change stays current, the review plan
    /// removes it.
    RemovedHere,
    /// Removed on the other machine, changed here: the change stays current, the review plan
    /// removes it.
    RemovedThere,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub entry: String,
    pub kind: ConflictKind,
    /// Whether the version that stays current is the other machine's.
    pub theirs_kept: bool,
}

/// What a merge brought in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Merged {
    /// Facts appended to this machine's archive.
    pub facts: usize,
    /// Entries of `memory.md` taken from the other machine (new or changed there).
    pub entries: usize,
    /// Tombstones that came from the other machine.
    pub tombstones: usize,
    pub conflicts: Vec<Conflict>,
    /// Entries that left `memory.md` because a tombstone covers them or one of their facts.
    pub buried: Vec<String>,
    /// Paths the other machine changed that are not memfold's to merge ([`allowed`]): left as
    /// they are here, never read nor written.
    pub refused: Vec<String>,
    /// Facts from the other machine whose credentials were redacted here (`ingest.secrets`).
    pub redacted: usize,
    /// Files of which the other machine's copy lacks something this one holds (tombstones,
    /// archived facts, history blocks): nothing was taken away here.
    pub fewer: Vec<String>,
    /// The review plan for the conflicts: it brings back the versions that lost, and removes
    /// the entries removed on one machine and changed on the other.
    pub plan: Option<String>,
}

/// Plan the merge: the change that writes it, and what it brings. Refused, naming the block and
/// the machine, while `memory.md` or `history.md` holds a block a person must mend first on a
/// side the merge would read ([`needs_mending`]).
pub fn plan(req: &Request) -> Result<(Change, Merged), Problem> {
    let empty = Side::default();
    let side = |path: &str| req.files.get(path).unwrap_or(&empty);
    // The other machine's memory.md and history.md, parsed once for every step that reads
    // them; this side's are the ledger's.
    let (theirs_memory, theirs_history) = (theirs_parsed(MEMORY, side(MEMORY)), theirs_parsed(HISTORY, side(HISTORY)));
    for (path, ours, theirs) in
        [(MEMORY, &req.ledger.memory, &theirs_memory), (HISTORY, &req.ledger.history, &theirs_history)]
    {
        if let Some(problem) = needs_mending(path, side(path), ours, theirs.as_ref(), req.other) {
            return Err(problem);
        }
    }
    let mut change = Change::new(format!("sync {}", req.run));
    let mut merged = Merged::default();

    // Tombstones first: they decide what may stay current. A union, always: a side with fewer
    // lines takes none away.
    let tomb_side = side(TOMBSTONES);
    let new_tomb_lines = added_lines(tomb_side);
    let mut tombstones: Vec<Tombstone> = req.ledger.tombstones.clone();
    for line in &new_tomb_lines {
        if let Ok(t) = serde_json::from_str::<Tombstone>(line) {
            tombstones.push(t);
            merged.tombstones += 1;
        }
    }
    if let Some(write) = lines_write(TOMBSTONES, tomb_side, &new_tomb_lines) {
        change.files.push(write);
    }
    if lacks_lines(tomb_side) {
        merged.fewer.push(TOMBSTONES.to_string());
    }

    // Archive day files: the facts the other side has and this one lacks.
    let mut facts: Vec<Fact> = Vec::new();
    for (path, files) in req.files {
        let Some(date) = day_of(path) else { continue };
        let day = merge_day(path, date, files, req)?;
        if day.fewer {
            merged.fewer.push(path.clone());
        }
        facts.extend(day.added);
        merged.redacted += day.redacted;
        change.files.extend(day.write);
    }
    merged.facts = facts.len();

    // memory.md, then the tombstone rule over the result.
    let mem = side(MEMORY);
    let ours_text = mem.ours().to_string();
    let (mut memory, taken, conflicts, losers) = merge_memory(mem, &req.ledger.memory, theirs_memory);
    merged.entries = taken;
    let all_facts: HashMap<&str, &Fact> =
        req.ledger.facts.iter().chain(facts.iter()).map(|f| (f.id.as_str(), f)).collect();
    let buried = bury_tombstoned(&mut memory, &tombstones, &all_facts, req.other, req.today);
    merged.buried = buried.iter().map(|e| e.id().to_string()).collect();
    let memory = memory.finish();
    let current_ids: HashSet<&str> = memory.entries().map(Entry::id).collect();
    let text = memory.render();
    let mut history_blocks: Vec<Entry> = losers.iter().map(|(loser, _)| loser.clone()).collect();
    history_blocks.extend(buried);
    // The merged file as the next reader parses it (blocks, lines), once.
    let after = EntryFile::parse(&text, MEMORY);
    if text != ours_text {
        change.memory = Some(MemoryWrite {
            before: content_hash(&ours_text),
            entries: deltas(&req.ledger.memory, &after),
            text: text.clone(),
        });
    }

    // history.md.
    let history = merge_history(side(HISTORY), &req.ledger.history, theirs_history.as_ref(), &history_blocks);
    if let Some(theirs) = &theirs_history
        && side(HISTORY).theirs != side(HISTORY).base
    {
        let there: HashSet<(&str, &str)> = theirs.entries().map(|e| (e.id(), e.content.as_str())).collect();
        let base = EntryFile::parse(side(HISTORY).base(), HISTORY);
        if base.entries().any(|e| !there.contains(&(e.id(), e.content.as_str()))) {
            merged.fewer.push(HISTORY.to_string());
        }
    }
    if let Some(history) = &history {
        change.history =
            Some(HistoryWrite::Rewrite { before: content_hash(side(HISTORY).ours()), text: history.clone() });
    }

    // MEMORY.md: a person's lines from both sides, without the lines of entries that left.
    let promoted_side = side(PROMOTED);
    let promoted_now = promoted_side.ours().to_string();
    let mut promoted_text = merge_promoted(promoted_side).unwrap_or_else(|| promoted_now.clone());
    // Gone: an entry current here or promoted on either side that the merge leaves out (the
    // other side's MEMORY.md may promote an entry this side had already removed).
    let promoted_ids: Vec<String> = promoted::parse(&promoted_text).generated.into_iter().map(|l| l.entry).collect();
    let gone: Vec<String> = ledger_ids(req.ledger)
        .map(str::to_string)
        .chain(promoted_ids)
        .filter(|id| !current_ids.contains(id.as_str()))
        .collect();
    if let Some(without) = promoted::without_lines(&promoted_text, &gone) {
        promoted_text = without;
    }
    if promoted_text != promoted_now {
        change.memory_md = Some((content_hash(&promoted_now), promoted_text));
    }

    // Any other path is not memfold's: named, never read nor written.
    merged.refused = req.files.keys().filter(|path| !allowed(path)).cloned().collect();

    // The watermark of what the merge leaves: facts from the other machine, and facts whose
    // entry the other machine took back (an undo), are pending until a pass takes them.
    if change.memory.is_some() || !facts.is_empty() || merged.tombstones > 0 {
        let after = Ledger {
            facts: req.ledger.facts.iter().chain(facts.iter()).cloned().collect(),
            memory: after.clone(),
            history: match &history {
                Some(text) => EntryFile::parse(text, HISTORY),
                None => req.ledger.history.clone(),
            },
            tombstones: tombstones.clone(),
            state: req.ledger.state.clone(),
            problems: Vec::new(),
        };
        let pending: HashSet<&str> = after.pending().into_iter().map(|f| f.id.as_str()).collect();
        let watermark = after.watermark(&pending, req.today);
        if watermark != req.ledger.state.watermark {
            let mut state = req.ledger.state.clone();
            state.watermark = watermark;
            change.state = Some(state);
        }
    }

    // Offered for review: the versions that lost a conflict (apply brings them back), and the
    // entries removed on one machine and changed on the other (apply removes them as that
    // machine did).
    let removals: Vec<&Conflict> = conflicts.iter().filter(|c| c.kind != ConflictKind::ChangedOnBoth).collect();
    if !losers.is_empty() || !removals.is_empty() {
        let mut ops: Vec<ProposedOp> = losers
            .iter()
            .filter(|(loser, _)| current_ids.contains(loser.id()))
            .map(|(loser, c)| {
                let whose = if c.theirs_kept { "this machine" } else { req.other };
                ProposedOp::with_signals(
                    Op::Replace {
                        target: loser.id().to_string(),
                        facts: Vec::new(),
                        content: loser.content.clone(),
                        why: Some(format!("changed on two machines: the version from {whose}")),
                    },
                    vec!["sync".into()],
                )
            })
            .collect();
        // Where each machine folded its entries, read once per machine that removed one.
        let (mut folds_here, mut folds_there) = (None, None);
        let unchanged_there = std::cell::OnceCell::new();
        for c in removals.into_iter().filter(|c| current_ids.contains(c.entry.as_str())) {
            let (remover, changer, folds) = match c.kind {
                ConflictKind::RemovedThere => {
                    let history = theirs_history.as_ref().unwrap_or_else(|| {
                        unchanged_there
                            .get_or_init(|| EntryFile::parse(side(HISTORY).theirs.as_deref().unwrap_or(""), HISTORY))
                    });
                    (req.other, "this machine", folds_there.get_or_insert_with(|| Folds::of(history)))
                }
                _ => ("this machine", req.other, folds_here.get_or_insert_with(|| Folds::of(&req.ledger.history))),
            };
            let why = Some(format!("removed on {remover}, changed on {changer}: remove it as {remover} did"));
            let target = c.entry.clone();
            let op = match folds.survivor(&target, &current_ids) {
                Some(into) => Op::Remove { target, into, why },
                None => Op::Retire { target, why },
            };
            ops.push(ProposedOp::with_signals(op, vec!["sync".into()]));
        }
        let no_facts = HashMap::new();
        let mut planner = Planner::new(after.clone(), &no_facts, req.run.to_string(), req.now, req.today);
        planner.apply(&ops);
        let plan = planner.finish(after.hash.clone());
        if !plan.journal.is_empty() {
            let stored = divert::stored(&plan, Vec::new(), PlanReason::Sync, req.run, req.now, req.today);
            change.records.push(stored.file());
            merged.plan = Some(req.run.to_string());
        }
    }
    merged.conflicts = conflicts;
    Ok((change, merged))
}

/// The other machine's version of `path` as the merge reads it, parsed; None when the merge
/// takes this side's file as it is (the other machine left it as it was, or has the same).
fn theirs_parsed(path: &str, files: &Side) -> Option<EntryFile> {
    match take_one_side(files) {
        Taken::Ours => None,
        Taken::Theirs(_) | Taken::Both => Some(EntryFile::parse(files.theirs.as_deref().unwrap_or(""), path)),
    }
}

/// The first block a person must mend (a broken entry header, or a block left open that hides
/// the entries after it) in a version of a file the merge would read: the other machine's
/// (`theirs`, when it changed the file), this machine's (`ours`) too when both did. Merged by
/// id, an entry hidden on one side would look removed there, and a broken block cannot be told
/// apart from the entries it swallowed; so nothing is merged until it is mended where it was
/// written.
fn needs_mending(
    path: &str,
    files: &Side,
    ours: &EntryFile,
    theirs: Option<&EntryFile>,
    other: &str,
) -> Option<Problem> {
    let theirs = theirs?;
    let both = matches!(take_one_side(files), Taken::Both);
    let sides = std::iter::once((theirs, other)).chain(both.then_some((ours, "this machine")));
    for (file, whose) in sides {
        let found = file
            .hidden
            .first()
            .map(|(id, line)| (*line, format!("entry {id} is hidden inside a block left open before it")))
            .or_else(|| {
                file.entries().find(|e| e.needs_mending()).map(|e| (e.line, "an entry header is broken".into()))
            });
        if let Some((line, what)) = found {
            return Some(Problem::new(
                path,
                line,
                format!(
                    "{what} in the version on {whose}: mend it there (`memfold verify` names it), sync there, \
                     then here; nothing was merged"
                ),
            ));
        }
    }
    None
}

/// Where a machine's history says each entry went when it was last set aside: the entry it was
/// folded into (a REMOVE, a merge or a supersession), or nowhere (an undo took it back).
struct Folds<'a>(HashMap<&'a str, Option<&'a str>>);

impl<'a> Folds<'a> {
    fn of(history: &'a EntryFile) -> Folds<'a> {
        let mut leads = HashMap::new();
        for e in history.entries() {
            let folded = matches!(e.meta.status, Some(HistoryStatus::Merged | HistoryStatus::Superseded));
            leads.insert(e.id(), e.meta.superseded_by.as_deref().filter(|_| folded));
        }
        Folds(leads)
    }

    /// The current entry `id` was folded into, followed on while that one was folded too; None
    /// when its last version leads nowhere or to nothing current.
    fn survivor(&self, id: &str, current: &HashSet<&str>) -> Option<String> {
        let mut at = id;
        for _ in 0..self.0.len() {
            let next = self.0.get(at).copied().flatten()?;
            if next == id {
                return None;
            }
            if current.contains(next) {
                return Some(next.to_string());
            }
            at = next;
        }
        None
    }
}

/// The ids of this side's `memory.md` as read under the lock.
fn ledger_ids(ledger: &Ledger) -> impl Iterator<Item = &str> {
    ledger.memory.entries().map(Entry::id)
}

/// The day a path names, if it is an archive day file.
fn day_of(path: &str) -> Option<NaiveDate> {
    let name = path.strip_prefix("archive/")?;
    let date = archive::day_of(std::path::Path::new(name))?;
    // The name memfold gives a day file, and nothing else (no folder, no other spelling).
    (name == format!("{}.md", date.format("%Y-%m-%d"))).then_some(date)
}

enum Taken {
    /// The result is the other side's (None: it deleted the file).
    Theirs(Option<String>),
    Ours,
    /// Both changed it, differently.
    Both,
}

/// The whole-file three-way rule.
fn take_one_side(files: &Side) -> Taken {
    if files.ours == files.theirs || files.theirs == files.base {
        Taken::Ours
    } else if files.ours == files.base {
        Taken::Theirs(files.theirs.clone())
    } else {
        Taken::Both
    }
}

/// Write `text` over `ours`: an append when it only adds to it, a guarded replace otherwise.
fn write_to(path: &str, ours: &str, text: &str) -> FileWrite {
    match text.strip_prefix(ours) {
        Some(rest) if ours.is_empty() || ours.ends_with('\n') => {
            FileWrite::Append { path: path.to_string(), text: rest.to_string() }
        }
        _ => FileWrite::Replace { path: path.to_string(), before: content_hash(ours), text: text.to_string() },
    }
}

/// Lines of a log the other side has and this one lacks, in the other side's order.
fn added_lines(files: &Side) -> Vec<String> {
    let ours: HashSet<&str> = files.ours().lines().collect();
    let mut seen = HashSet::new();
    files
        .theirs
        .as_deref()
        .unwrap_or("")
        .lines()
        .filter(|l| !l.trim().is_empty() && !ours.contains(l) && seen.insert(*l))
        .map(str::to_string)
        .collect()
}

/// The write that makes a log hold the union of both sides: the other side's bytes when they
/// hold every line of this side's (so both machines end with the same file), else the lines
/// this side lacks appended. A side with fewer lines never takes one away.
fn lines_write(path: &str, files: &Side, added: &[String]) -> Option<FileWrite> {
    if added.is_empty() {
        return None;
    }
    let theirs = files.theirs.as_deref().unwrap_or("");
    let all: HashSet<&str> = theirs.lines().collect();
    let superset = files.ours().lines().filter(|l| !l.trim().is_empty()).all(|l| all.contains(l));
    if superset && theirs.ends_with('\n') {
        return Some(write_to(path, files.ours(), theirs));
    }
    Some(FileWrite::Append { path: path.to_string(), text: added.iter().map(|l| format!("{l}\n")).collect() })
}

/// Whether the other side took a line out of a log since the last sync (this side keeps it).
fn lacks_lines(files: &Side) -> bool {
    if files.theirs == files.base {
        return false;
    }
    let theirs: HashSet<&str> = files.theirs.as_deref().unwrap_or("").lines().collect();
    files.base().lines().any(|l| !l.trim().is_empty() && !theirs.contains(l))
}

/// What one day file brings from the other machine.
#[derive(Default)]
struct DayMerge {
    write: Option<FileWrite>,
    /// Its facts this side lacked, as they are appended here.
    added: Vec<Fact>,
    /// Credentials redacted in them.
    redacted: usize,
    /// The other side's copy lacks a fact this one has.
    fewer: bool,
}

/// A fact's text or source as this machine stores it: redacted unless `ingest.secrets` is
/// `allow`. How many credentials it held.
fn held(policy: SecretsPolicy, text: &str) -> (String, usize) {
    match policy {
        SecretsPolicy::Allow => (text.to_string(), 0),
        // A fact the other machine already keeps cannot be refused there; here it is stored
        // without its credential, as `redact` would.
        SecretsPolicy::Redact | SecretsPolicy::Refuse => {
            let (text, found) = secrets::redact(text);
            (text, found.len())
        }
    }
}

/// Whether two readings of one fact id say the same: the same text and source, or the same
/// once their credentials are masked (one machine redacts what the other allows).
fn same_fact(a: &Fact, b: &Fact) -> bool {
    let same = |x: &str, y: &str| x == y || secrets::redact(x).0 == secrets::redact(y).0;
    same(&a.text, &b.text) && same(a.src.as_deref().unwrap_or(""), b.src.as_deref().unwrap_or(""))
}

/// One day file: the write that brings the other side's facts, and those facts. Refused,
/// naming the line, when the other side says a fact this side has differently: an archived
/// fact never changes once written, on any machine.
fn merge_day(path: &str, date: NaiveDate, files: &Side, req: &Request) -> Result<DayMerge, Problem> {
    let taken = take_one_side(files);
    let (Some(theirs), Taken::Theirs(_) | Taken::Both) = (files.theirs.as_deref(), &taken) else {
        return Ok(DayMerge::default());
    };
    let (ours_facts, _) = archive::parse_day(date, files.ours(), path);
    let mine: HashMap<&str, &Fact> = ours_facts.iter().map(|f| (f.id.as_str(), f)).collect();
    let (theirs_facts, _) = archive::parse_day(date, theirs, path);
    let mut shared_differ = false;
    for fact in &theirs_facts {
        let Some(ours) = mine.get(fact.id.as_str()) else { continue };
        if fact.text == ours.text && fact.src == ours.src {
            continue;
        }
        if !same_fact(ours, fact) {
            return Err(rewritten(path, date, files, ours, fact, req.other));
        }
        shared_differ = true;
    }
    let theirs_ids: HashSet<&str> = theirs_facts.iter().map(|f| f.id.as_str()).collect();
    // The other side's bytes only when they hold every fact this side has: an archive line a
    // person deleted there is not deleted here (the archive never loses a fact), and this
    // side's file then carries it back.
    let superset = mine.keys().all(|id| theirs_ids.contains(id));
    // Whether the other side took out a fact the last synced version had (this side keeps it).
    let fewer = !superset && {
        let (base, _) = archive::parse_day(date, files.base(), path);
        base.iter().any(|f| !theirs_ids.contains(f.id.as_str()))
    };
    let mut added: Vec<Fact> = theirs_facts.into_iter().filter(|f| !mine.contains_key(f.id.as_str())).collect();
    let mut redacted = 0;
    let mut changed: HashSet<String> = HashSet::new();
    for fact in &mut added {
        let (text, n) = held(req.secrets, &fact.text);
        let (src, m) = fact.src.as_deref().map(|s| held(req.secrets, s)).unzip();
        if n + m.unwrap_or(0) > 0 {
            fact.text = text;
            fact.src = src;
            redacted += n + m.unwrap_or(0);
            changed.insert(fact.id.clone());
        }
    }
    // Their bytes whole only when nothing in them is held back here.
    let verbatim =
        superset && !shared_differ && (req.secrets == SecretsPolicy::Allow || secrets::find(theirs).is_empty());
    let write = match taken {
        Taken::Theirs(Some(text)) if verbatim => Some(write_to(path, files.ours(), &text)),
        Taken::Theirs(_) | Taken::Both if !added.is_empty() => {
            let lines: Vec<&str> = theirs.lines().collect();
            let mut text = String::new();
            if files.ours().is_empty() {
                text.push_str(&format!("# {date}\n\n"));
            }
            for fact in &added {
                // The line as written there when it names its id; a line typed by hand, whose
                // id comes from its place in the file, gets its id written down, as does a
                // fact whose credential was redacted here.
                let raw = lines.get(fact.line.wrapping_sub(1)).copied().unwrap_or("");
                if !changed.contains(&fact.id) && raw.contains(&format!("\"id\":\"{}\"", fact.id)) {
                    text.push_str(raw);
                    text.push('\n');
                } else {
                    text.push_str(&archive::render_line(fact));
                }
            }
            Some(FileWrite::Append { path: path.to_string(), text })
        }
        _ => {
            added.clear();
            None
        }
    };
    Ok(DayMerge { write, added, redacted, fewer })
}

/// The refusal of a merge whose two sides say one archived fact differently, naming the line
/// and the machine that changed it (from the last synced version).
fn rewritten(path: &str, date: NaiveDate, files: &Side, ours: &Fact, theirs: &Fact, other: &str) -> Problem {
    let (base, _) = archive::parse_day(date, files.base(), path);
    let was = base.iter().find(|f| f.id == ours.id);
    let (whose, line) = match was {
        Some(was) if same_fact(was, ours) => (other.to_string(), theirs.line),
        Some(was) if same_fact(was, theirs) => ("this machine".to_string(), ours.line),
        _ => (format!("this machine (line {}) and on {other}", ours.line), theirs.line),
    };
    Problem::new(
        path,
        line,
        format!(
            "fact {} was rewritten on {whose}: an archived fact never changes once written; put its line back as \
             it was, then sync; nothing was merged",
            ours.id
        ),
    )
}

/// The canonical text of each entry of a file, by id.
fn versions(file: &EntryFile) -> HashMap<&str, String> {
    file.entries().map(|e| (e.id(), e.render())).collect()
}

/// Later `updated` first; the same day, the greater hash (any rule both machines share).
fn later(a: &Entry, b: &Entry) -> bool {
    (a.meta.updated, content_hash(a.render())) > (b.meta.updated, content_hash(b.render()))
}

/// The merged `memory.md`, how many entries came from the other side, the conflicts, and the
/// versions that lost one (as history blocks) with their conflict.
/// `ours_file` is this side's `memory.md` as the ledger parsed it (`files.ours`' text), `theirs`
/// the other side's as [`theirs_parsed`] gives it.
fn merge_memory(
    files: &Side,
    ours_file: &EntryFile,
    theirs: Option<EntryFile>,
) -> (ById, usize, Vec<Conflict>, Vec<(Entry, Conflict)>) {
    let Some(theirs) = theirs else { return (ById::new(ours_file.clone()), 0, Vec::new(), Vec::new()) };
    match take_one_side(files) {
        Taken::Ours => return (ById::new(ours_file.clone()), 0, Vec::new(), Vec::new()),
        Taken::Theirs(_) => {
            let (o, t) = (versions(ours_file), versions(&theirs));
            let taken = t.iter().filter(|(id, v)| o.get(*id) != Some(*v)).count();
            return (ById::new(theirs), taken, Vec::new(), Vec::new());
        }
        Taken::Both => {}
    }
    let base = EntryFile::parse(files.base(), MEMORY);
    let (b, o, t) = (versions(&base), versions(ours_file), versions(&theirs));
    let mine: HashMap<&str, &Entry> = ours_file.entries().map(|e| (e.id(), e)).collect();
    let mut merged = ById::new(ours_file.clone());
    let (mut taken, mut conflicts, mut losers) = (0, Vec::new(), Vec::new());
    for entry in theirs.entries() {
        let id = entry.id();
        let (bv, ov, tv) = (b.get(id), o.get(id), t.get(id));
        if ov == tv || tv == bv {
            continue;
        }
        if ov == bv {
            // Changed (or added) there only.
            merged.put(entry);
            taken += 1;
            continue;
        }
        match mine.get(id) {
            None => {
                // Removed here, changed there: the change stays, a person decides.
                merged.put(entry);
                taken += 1;
                conflicts.push(Conflict { entry: id.to_string(), kind: ConflictKind::RemovedHere, theirs_kept: true });
            }
            Some(&mine) => {
                let theirs_kept = later(entry, mine);
                let conflict = Conflict { entry: id.to_string(), kind: ConflictKind::ChangedOnBoth, theirs_kept };
                let loser = if theirs_kept {
                    merged.put(entry);
                    taken += 1;
                    mine
                } else {
                    entry
                };
                losers.push((retired(loser), conflict.clone()));
                conflicts.push(conflict);
            }
        }
    }
    for entry in ours_file.entries() {
        let id = entry.id();
        if t.contains_key(id) || !b.contains_key(id) {
            continue;
        }
        if o.get(id) == b.get(id) {
            merged.remove(id); // removed there, unchanged here
        } else {
            conflicts.push(Conflict { entry: id.to_string(), kind: ConflictKind::RemovedThere, theirs_kept: false });
        }
    }
    (merged, taken, conflicts, losers)
}

/// An entry file changed entry by entry through a map from id to place, so that a merge of
/// two large files makes no scan per entry it changes.
struct ById {
    file: EntryFile,
    at: HashMap<String, usize>,
    removed: Vec<usize>,
}

impl ById {
    fn new(file: EntryFile) -> ById {
        // Reversed, so the first block of an id a person copied is the one the map names.
        let at = file
            .items
            .iter()
            .enumerate()
            .rev()
            .filter_map(|(i, item)| match item {
                Item::Entry(e) => Some((e.id().to_string(), i)),
                Item::Trivia(_) => None,
            })
            .collect();
        ById { file, at, removed: Vec::new() }
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.at.values().filter_map(|&i| match &self.file.items[i] {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        })
    }

    /// Put `entry` where the entry with its id is, or at the end.
    fn put(&mut self, entry: &Entry) {
        match self.at.get(entry.id()) {
            Some(&i) => self.file.items[i] = Item::Entry(entry.clone()),
            None => {
                self.file.push(entry.clone());
                self.at.insert(entry.id().to_string(), self.file.items.len() - 1);
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<Entry> {
        let i = self.at.remove(id)?;
        self.removed.push(i);
        match &self.file.items[i] {
            Item::Entry(e) => Some(e.clone()),
            Item::Trivia(_) => None,
        }
    }

    fn finish(mut self) -> EntryFile {
        self.removed.sort_unstable();
        self.removed.dedup();
        // From the back, so the places still to remove stay where they were.
        for &i in self.removed.iter().rev() {
            self.file.remove_item(i);
        }
        self.file
    }
}

/// A version that lost to another of its id, as a history block that leads to the current one.
fn retired(entry: &Entry) -> Entry {
    let mut meta = entry.meta.clone();
    meta.status = Some(HistoryStatus::Replaced);
    meta.superseded_by = Some(entry.id().to_string());
    meta.first_seen = meta.first_seen.or(meta.updated);
    meta.extra.insert("reason".into(), "changed on two machines".into());
    Entry::new(meta, &entry.content)
}

/// Take out of `memory` every entry a tombstone names or that names a tombstoned fact; their
/// history blocks.
fn bury_tombstoned(
    memory: &mut ById,
    tombstones: &[Tombstone],
    facts: &HashMap<&str, &Fact>,
    other: &str,
    today: NaiveDate,
) -> Vec<Entry> {
    if tombstones.is_empty() {
        return Vec::new();
    }
    let tombstoned = Tombstoned::of(tombstones);
    let dead = |fact: &str| tombstoned.names(fact) || facts.get(fact).is_some_and(|f| tombstoned.covers(f));
    let doomed: Vec<String> = memory
        .entries()
        .filter(|e| tombstoned.names(e.id()) || e.meta.sources.iter().any(|s| dead(s)))
        .map(|e| e.id().to_string())
        .collect();
    let mut blocks = Vec::new();
    for id in doomed {
        let Some(entry) = memory.remove(&id) else { continue };
        let mut meta = entry.meta.clone();
        meta.status = Some(HistoryStatus::Deleted);
        meta.valid_until = Some(today);
        let reason = format!("a fact of it was forgotten (merged from {other})");
        meta.extra.insert("reason".into(), serde_json::Value::String(reason));
        blocks.push(Entry::new(meta, &entry.content));
    }
    blocks
}

/// Entry deltas between two versions of `memory.md`, for the commit record.
fn deltas(before: &EntryFile, after: &EntryFile) -> Vec<EntryDelta> {
    let (b, a) = (versions(before), versions(after));
    let mut ids: Vec<&str> = b.keys().chain(a.keys()).copied().collect::<HashSet<_>>().into_iter().collect();
    ids.sort_unstable();
    ids.into_iter()
        .filter(|id| b.get(id) != a.get(id))
        .map(|id| EntryDelta::of(id, b.get(id).map(String::as_str), a.get(id).map(String::as_str)))
        .collect()
}

/// The merged `history.md` (None: this side's stays as it is), from this side's as the ledger
/// parsed it and the other side's as [`theirs_parsed`] gives it. History is a union: a block
/// of this side leaves only where the other side re-marked it (an undo: the same id and text
/// with other metadata), never because the other side's file lacks it.
fn merge_history(files: &Side, ours: &EntryFile, theirs: Option<&EntryFile>, extra: &[Entry]) -> Option<String> {
    let remarked = |block: &Entry, theirs: &EntryFile| {
        theirs.entries().any(|t| t.id() == block.id() && t.content == block.content)
    };
    let mut merged = match (take_one_side(files), theirs) {
        (Taken::Ours, _) | (_, None) => ours.clone(),
        // Every block here is there, or re-marked there: their bytes.
        (Taken::Theirs(_), Some(theirs))
            if {
                let in_theirs: HashSet<String> = theirs.entries().map(Entry::render).collect();
                ours.entries().all(|b| in_theirs.contains(&b.render()) || remarked(b, theirs))
            } =>
        {
            theirs.clone()
        }
        (_, Some(theirs)) => {
            let base = EntryFile::parse(files.base(), HISTORY);
            let mut merged = ours.clone();
            let in_base: HashSet<String> = base.entries().map(Entry::render).collect();
            let in_theirs: HashSet<String> = theirs.entries().map(Entry::render).collect();
            // Blocks the other side took back since the last sync (an undo re-marks them).
            let gone: Vec<usize> = merged
                .items
                .iter()
                .enumerate()
                .filter(|(_, item)| {
                    matches!(item, Item::Entry(e) if {
                        let r = e.render();
                        in_base.contains(&r) && !in_theirs.contains(&r) && remarked(e, theirs)
                    })
                })
                .map(|(at, _)| at)
                .collect();
            for at in gone.into_iter().rev() {
                merged.remove_item(at);
            }
            let mut have: HashSet<String> = merged.entries().map(Entry::render).collect();
            for block in theirs.entries() {
                let r = block.render();
                if !in_base.contains(&r) && have.insert(r) {
                    merged.push(block.clone());
                }
            }
            merged
        }
    };
    let have: HashSet<String> = merged.entries().map(Entry::render).collect();
    for block in extra {
        if !have.contains(&block.render()) {
            merged.push(block.clone());
        }
    }
    let text = merged.render();
    (text != files.ours()).then_some(text)
}

/// The merged `MEMORY.md` (None: this side's stays as it is).
fn merge_promoted(files: &Side) -> Option<String> {
    match take_one_side(files) {
        Taken::Ours => None,
        Taken::Theirs(theirs) => theirs.or(Some(String::new())),
        Taken::Both => {
            let base = promoted::parse(files.base());
            let ours = promoted::parse(files.ours());
            let theirs = promoted::parse(files.theirs.as_deref().unwrap_or(""));
            let mut merged = promoted::parse(files.ours());
            merged.before = merge_text(&base.before, &ours.before, &theirs.before);
            merged.after = merge_text(&base.after, &ours.after, &theirs.after);
            for line in &theirs.hand_inside {
                if !merged.hand_inside.contains(line) && !base.hand_inside.contains(line) {
                    merged.hand_inside.push(line.clone());
                }
            }
            Some(promoted::render(&merged))
        }
    }
}

/// A person's text changed on one side takes that side's; changed on both, this side's lines
/// and then the other side's new ones.
fn merge_text(base: &str, ours: &str, theirs: &str) -> String {
    if ours == base || ours == theirs {
        return theirs.to_string();
    }
    if theirs == base {
        return ours.to_string();
    }
    let mine: HashSet<&str> = ours.lines().collect();
    let old: HashSet<&str> = base.lines().collect();
    let mut out = ours.to_string();
    for line in theirs.lines().filter(|l| !mine.contains(l) && !old.contains(l)) {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
