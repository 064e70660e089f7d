//! A memory of N entries written straight to `memory.md`, for the benches that time a daemon
//! or a CLI over a large root.

use chrono::NaiveDate;
use memfold::store::Root;
use memfold::store::entries::{Entry, EntryFile, EntryMeta};

/// Write `texts` as the entries of `root`'s `memory.md` (ids `m-000000`…, each naming a seed
/// fact of its own as its source).
pub fn write_entries(root: &Root, texts: &[String]) {
    let day = NaiveDate::from_ymd_opt(2026, 1, 10).unwrap();
    let mut file = EntryFile::default();
    for (i, text) in texts.iter().enumerate() {
        let meta = EntryMeta {
            first_seen: Some(day),
            updated: Some(day),
            sources: vec![format!("f-seed{i:06}")],
            ..EntryMeta::new(format!("m-{i:06}"))
        };
        file.push(Entry::new(meta, text));
    }
    std::fs::write(root.memory(), file.render()).unwrap();
}
