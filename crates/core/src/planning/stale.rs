//! Decay by use, the retiring half (pure): which current entries a sweep proposes retiring
//! because nobody has used them for `decay.retire_after_days`.
//!
//! An entry's **last use** is the latest of: the last time a search returned it (the use
//! table, [`memfold_store::uses`]), the day it was written or last changed (`updated`, else
//! `first_seen`), and the last time a person kept it by rejecting a proposal to retire it. An
//! entry is **stale** when its last use is more than `retire_after_days` days before today.
//! Never proposed: pinned entries, entries with a line in `MEMORY.md`, entries a pending plan
//! touches. Each stale entry is one STALE op whose `why` says when it was last used and how.
//! The ops go into a plan for review (reason `stale`); applied, an entry leaves `memory.md` for
//! history as `retired`, where `--history` finds it and `undo` brings it back.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};

use super::run::ops::{Op, ProposedOp};
use memfold_store::entries::{Entry, EntryFile};
use memfold_store::uses::Uses;

/// What decides whether an entry is stale, besides the entry.
#[derive(Debug, Clone, Default)]
pub struct Exempt {
    /// Entries with a line in `MEMORY.md`, and those a pending plan touches.
    pub ids: HashSet<String>,
    /// When a person last kept an entry (rejected a plan that would retire it).
    pub kept: HashMap<String, DateTime<Utc>>,
}

/// How an entry was last used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastUse {
    /// A search returned it (`count` times in all).
    Recalled { day: NaiveDate, count: u64 },
    /// Written or changed, and not recalled since.
    Written(NaiveDate),
    /// A person kept it when its retirement was proposed.
    Kept(NaiveDate),
}

impl LastUse {
    pub fn day(self) -> NaiveDate {
        match self {
            LastUse::Recalled { day, .. } | LastUse::Written(day) | LastUse::Kept(day) => day,
        }
    }
}

/// The last use of `entry` (see the module docs); `day_of` gives an instant's day.
pub fn last_use(
    entry: &Entry,
    uses: &Uses,
    exempt: &Exempt,
    day_of: impl Fn(DateTime<Utc>) -> NaiveDate,
) -> Option<LastUse> {
    let written = entry.meta.updated.or(entry.meta.first_seen).map(LastUse::Written);
    let recalled = uses.ids.get(entry.id()).map(|u| LastUse::Recalled { day: day_of(u.0), count: u.1 });
    let kept = exempt.kept.get(entry.id()).map(|t| LastUse::Kept(day_of(*t)));
    // On the same day, a recall says more than a write, and a write more than a keep.
    [recalled, written, kept].into_iter().flatten().reduce(|a, b| if b.day() > a.day() { b } else { a })
}

/// Whether `entry` is past `retire_after_days` unused on `today` (never for a pinned or exempt
/// one, nor for an entry with no date and no use: nothing says how old it is).
pub fn is_stale(
    entry: &Entry,
    last: Option<LastUse>,
    exempt: &Exempt,
    today: NaiveDate,
    retire_after_days: u32,
) -> bool {
    if retire_after_days == 0 || entry.meta.pinned || exempt.ids.contains(entry.id()) {
        return false;
    }
    last.is_some_and(|last| (today - last.day()).num_days() > i64::from(retire_after_days))
}

/// The STALE ops for the stale entries of `memory`, in file order.
pub fn proposals(
    memory: &EntryFile,
    uses: &Uses,
    exempt: &Exempt,
    today: NaiveDate,
    retire_after_days: u32,
    day_of: impl Fn(DateTime<Utc>) -> NaiveDate,
) -> Vec<ProposedOp> {
    let mut out = Vec::new();
    for entry in memory.entries() {
        let last = last_use(entry, uses, exempt, &day_of);
        if !is_stale(entry, last, exempt, today, retire_after_days) {
            continue;
        }
        let Some(last) = last else { continue };
        let days = (today - last.day()).num_days();
        let why = match last {
            LastUse::Recalled { day, count: 1 } => format!("last recalled {day} (once), {days} days unused"),
            LastUse::Recalled { day, count } => format!("last recalled {day} ({count} times), {days} days unused"),
            LastUse::Written(day) => format!("never recalled since it was written {day}, {days} days unused"),
            LastUse::Kept(day) => format!("kept by a person {day}, not recalled since, {days} days unused"),
        };
        let mut op = ProposedOp::new(Op::Stale { target: entry.id().to_string(), why: Some(why) });
        op.signals = vec!["stale".into()];
        out.push(op);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use memfold_store::uses::Use;

    fn memory() -> EntryFile {
        let text = "<!--m {\"id\":\"m-old\",\"first_seen\":\"2024-01-02\"}-->\nOld and unused.\n\n\
                    <!--m {\"id\":\"m-used\",\"first_seen\":\"2024-01-02\"}-->\nOld but recalled.\n\n\
                    <!--m {\"id\":\"m-pin\",\"first_seen\":\"2024-01-02\",\"pinned\":true}-->\nPinned.\n\n\
                    <!--m {\"id\":\"m-new\",\"first_seen\":\"2025-06-01\"}-->\nNew.\n\n\
                    <!--m {\"id\":\"m-kept\",\"first_seen\":\"2024-01-02\"}-->\nKept by a person.\n\n\
                    <!--m {\"id\":\"m-promoted\",\"first_seen\":\"2024-01-02\"}-->\nIn MEMORY.md.\n\n\
                    Written by hand, no date.\n";
        EntryFile::parse(text, "memory.md")
    }

    fn at(day: &str) -> DateTime<Utc> {
        format!("{day}T12:00:00Z").parse().unwrap()
    }

    #[test]
    fn only_entries_unused_past_the_limit_are_proposed_with_their_last_use() {
        let m = memory();
        let mut uses = Uses::default();
        uses.ids.insert("m-used".into(), Use(at("2025-03-01"), 4));
        let exempt =
            Exempt { ids: ["m-promoted".to_string()].into(), kept: [("m-kept".to_string(), at("2025-05-01"))].into() };
        let today: NaiveDate = "2025-12-01".parse().unwrap();
        let ops = proposals(&m, &uses, &exempt, today, 365, |t| t.date_naive());
        let named: Vec<(&str, &str)> = ops
            .iter()
            .map(|o| match &o.op {
                Op::Stale { target, why } => (target.as_str(), why.as_deref().unwrap_or("")),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(named, [("m-old", "never recalled since it was written 2024-01-02, 699 days unused")]);
        let later: NaiveDate = "2026-05-01".parse().unwrap();
        let ops = proposals(&m, &uses, &exempt, later, 365, |t| t.date_naive());
        let ids: Vec<&str> = ops.iter().filter_map(|o| o.op.target()).collect();
        assert_eq!(ids, ["m-old", "m-used"], "a year after its last recall; the keep is younger");
        assert!(proposals(&m, &uses, &exempt, later, 0, |t| t.date_naive()).is_empty(), "0 = never");
    }
}
