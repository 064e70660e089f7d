//! The keys an LLM gave facts, cached by text in `.memfold/aspects.jsonl`, one line per text.
//!
//! They are derived data: deleting the file costs a keying call per pass for the facts still
//! pending, nothing else. A line is `{"text":"<sha256 of the text>","keys":["user / employer"]}`;
//! a line that does not parse is skipped, and a later line for the same text wins.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::Root;
use crate::store::archive::clean_text;

#[derive(Serialize, Deserialize)]
struct Line {
    text: String,
    keys: Vec<String>,
}

/// The cached keys of a root, by text.
#[derive(Debug, Default, Clone)]
pub struct KeyCache {
    path: PathBuf,
    keys: HashMap<String, Vec<String>>,
}

/// What a text is cached under: the hash of its words, so spacing does not matter.
fn text_hash(text: &str) -> String {
    crate::store::content_hash(clean_text(text))
}

impl KeyCache {
    /// The cache of `root` (empty when the file is missing or unreadable).
    pub fn load(root: &Root) -> KeyCache {
        KeyCache::at(root.state_dir().join("aspects.jsonl"))
    }

    fn at(path: PathBuf) -> KeyCache {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let keys = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Line>(l).ok())
            .map(|line| (line.text, line.keys))
            .collect();
        KeyCache { path, keys }
    }

    /// The keys cached for `text`.
    pub fn get(&self, text: &str) -> Option<&[String]> {
        self.keys.get(&text_hash(text)).map(Vec::as_slice)
    }

    /// Cache the keys of these texts (appended to the file, durably).
    pub fn put(&mut self, keyed: &[(String, Vec<String>)]) -> std::io::Result<()> {
        if keyed.is_empty() {
            return Ok(());
        }
        let mut lines = String::new();
        for (text, keys) in keyed {
            let line = Line { text: text_hash(text), keys: keys.clone() };
            lines.push_str(&serde_json::to_string(&line).map_err(std::io::Error::other)?);
            lines.push('\n');
            self.keys.insert(line.text, line.keys);
        }
        crate::store::atomic::append_durable(&self.path, lines.as_bytes())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_kept_by_text_and_a_broken_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aspects.jsonl");
        let mut cache = KeyCache::at(path.clone());
        cache.put(&[("Moved to  Lisbon.".into(), vec!["user / home city".into()])]).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{not json\n"))
            .unwrap();
        let again = KeyCache::at(path);
        assert_eq!(again.get("Moved to Lisbon."), Some(&["user / home city".to_string()][..]));
        assert_eq!(again.get("Moved to Porto."), None);
    }
}
