//! The recall log `.memfold/recall.jsonl`: which entries searches returned, kept for a rolling window.
//!
//! Promotion ranks `MEMORY.md` lines by how often their entry was recalled. Queries are
//! stored only as a short hash. The log is compacted (records older than the window
//! dropped) when its oldest record falls out of the window.

use std::collections::HashMap;

use chrono::{Duration, Utc};

use crate::state::{Recall, StateError, append_jsonl, read_jsonl, rewrite_jsonl};
use crate::uses::Uses;
use crate::{Root, content_hash};

/// Record that `ids` were returned for `query`, compacting the log when due.
pub fn record(root: &Root, query: &str, ids: &[String], window_days: u32) -> Result<(), StateError> {
    if ids.is_empty() {
        return Ok(());
    }
    let now = crate::sys::clock::now();
    let query = content_hash(query)[..12].to_string();
    let records: Vec<Recall> =
        ids.iter().map(|id| Recall { id: id.clone(), time: now, query: query.clone() }).collect();
    // Not fsynced: a search must not wait for the disk (several ms on many), and a power cut
    // can only cost the last searches' counts.
    append_jsonl(&root.recall(), &records)?;
    // Only the first record is read to decide: a search must not cost more the longer the
    // log (a daemon answering an agent appends to it thousands of times a day).
    let cutoff = now - Duration::days(window_days.into());
    let compact = oldest(&root.recall()).is_some_and(|time| time < cutoff);
    if !compact && !Uses::due(root) {
        return Ok(());
    }
    // The use table holds every record before any is dropped (see `store::uses`).
    let mut uses = Uses::load(root);
    uses.fold(root);
    if let Err(e) = uses.save(root) {
        tracing::debug!(error = %e, "could not save the use table; the recall log is kept whole");
        return Ok(());
    }
    if compact {
        let (all, _) = read_jsonl::<Recall>(&root.recall(), ".memfold/recall.jsonl")?;
        let kept: Vec<Recall> = all.into_iter().filter(|r| r.time >= cutoff).collect();
        rewrite_jsonl(&root.recall(), &kept)?;
        uses.holds_whole_log(root);
        if let Err(e) = uses.save(root) {
            tracing::debug!(error = %e, "could not save the use table");
        }
    }
    Ok(())
}

/// The time of the first readable record of the log.
fn oldest(path: &std::path::Path) -> Option<chrono::DateTime<Utc>> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| serde_json::from_str::<Recall>(&line).ok().map(|r| r.time))
}

/// Hits per id within the window.
pub fn summary(root: &Root, window_days: u32) -> Result<HashMap<String, usize>, StateError> {
    let (all, _) = read_jsonl::<Recall>(&root.recall(), ".memfold/recall.jsonl")?;
    let cutoff = crate::sys::clock::now() - Duration::days(window_days.into());
    let mut counts = HashMap::new();
    for r in all.into_iter().filter(|r| r.time >= cutoff) {
        *counts.entry(r.id).or_default() += 1;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_records_are_compacted_away() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let old = Recall { id: "m-old".into(), time: Utc::now() - Duration::days(40), query: "q".into() };
        append_jsonl(&root.recall(), &[old]).unwrap();
        record(&root, "where do I live", &["m-1".into(), "m-1".into(), "m-2".into()], 30).unwrap();
        let counts = summary(&root, 30).unwrap();
        assert_eq!(counts.get("m-1"), Some(&2));
        assert_eq!(counts.get("m-old"), None);
        let text = std::fs::read_to_string(root.recall()).unwrap();
        assert!(!text.contains("m-old"), "compacted");
        assert!(!text.contains("where do I live"), "queries are hashed");
    }

    #[test]
    fn a_broken_first_line_does_not_keep_old_records() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        std::fs::write(root.recall(), "not json\n").unwrap();
        let old = Recall { id: "m-old".into(), time: Utc::now() - Duration::days(40), query: "q".into() };
        append_jsonl(&root.recall(), &[old]).unwrap();
        record(&root, "q", &["m-1".into()], 30).unwrap();
        let text = std::fs::read_to_string(root.recall()).unwrap();
        assert!(!text.contains("m-old") && text.contains("m-1"), "{text}");
    }

    /// The log is not fsynced, so a power cut may leave its last line torn: that line is lost,
    /// nothing else, and the next search's records start on a line of their own.
    #[test]
    fn a_torn_last_line_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        record(&root, "q", &["m-1".into()], 30).unwrap();
        let mut file = std::fs::OpenOptions::new().append(true).open(root.recall()).unwrap();
        std::io::Write::write_all(&mut file, b"{\"id\":\"m-torn\",\"ti").unwrap();
        record(&root, "q", &["m-2".into(), "m-1".into()], 30).unwrap();
        let counts = summary(&root, 30).unwrap();
        assert_eq!((counts.get("m-1"), counts.get("m-2"), counts.get("m-torn")), (Some(&2), Some(&1), None));
        let text = std::fs::read_to_string(root.recall()).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
    }
}
