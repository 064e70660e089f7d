//! Review and undo, case by case.

use chrono::{DateTime, Utc};

use super::plans::op_groups;
use super::undo::reinsert;
use super::*;
use crate::planning::run::ops::ProposedOp;
use crate::planning::run::plan::JournalRecord;
use memfold_store::entries::EntryMeta;

#[test]
fn a_removed_entry_goes_back_after_its_old_predecessor() {
    let block = |id: &str, text: &str| Entry::new(EntryMeta::new(id), text);
    let mut before = EntryFile::parse("# Memory\n\n", MEMORY);
    for (id, text) in [("m-a", "A."), ("m-b", "B."), ("m-c", "C.")] {
        before.push(block(id, text));
    }
    let before = EntryFile::parse(&before.render(), MEMORY);
    let mut now = before.clone();
    now.remove("m-b");
    reinsert(&mut now, block("m-b", "B."), Some(&before));
    assert_eq!(now.render(), before.render());
    now.remove("m-a");
    now.remove("m-b");
    reinsert(&mut now, block("m-b", "B."), Some(&before));
    let ids: Vec<&str> = now.entries().map(Entry::id).collect();
    assert_eq!(ids, ["m-b", "m-c"], "before its old successor when no predecessor is left");
}

/// Ops are grouped by a shared fact, target, `into` or changed entry, transitively, and
/// only by those.
#[test]
fn op_groups_join_ops_that_share_a_fact_or_an_entry() {
    use crate::planning::run::ops::Op;
    use crate::planning::run::plan::Change as EntryChange;
    let facts = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let record = |seq: usize, op: Op, changed: &[&str]| JournalRecord {
        run: "r-1".into(),
        seq,
        time: DateTime::<Utc>::UNIX_EPOCH,
        op: ProposedOp::new(op),
        changes: changed
            .iter()
            .map(|e| EntryChange { entry: e.to_string(), before: None, after: Some("x".into()) })
            .collect(),
    };
    let journal = vec![
        record(0, Op::Add { facts: facts(&["f-1"]), content: "A".into() }, &["m-a"]),
        record(1, Op::Add { facts: facts(&["f-2"]), content: "B".into() }, &["m-b"]),
        // Replaces the entry op 0 added: same group as op 0.
        record(
            2,
            Op::Replace { target: "m-a".into(), facts: facts(&["f-3"]), content: "A2".into(), why: None },
            &["m-a"],
        ),
        // Folds m-c into m-d, which op 4 rewrites with a fact op 1 used: ops 1, 3, 4 join.
        record(3, Op::Remove { target: "m-c".into(), into: "m-d".into(), why: None }, &["m-c"]),
        record(4, Op::Duplicate { target: "m-d".into(), facts: facts(&["f-2"]) }, &["m-d"]),
        // Shares nothing.
        record(5, Op::Add { facts: facts(&["f-9"]), content: "Z".into() }, &["m-z"]),
        // A fact id equal to an entry id is not a shared entry.
        record(6, Op::Add { facts: facts(&["m-z"]), content: "Q".into() }, &["m-q"]),
    ];
    assert_eq!(op_groups(&journal), vec![vec![0, 2], vec![1, 3, 4], vec![5], vec![6]]);
    assert!(op_groups(&[]).is_empty());
}
