//! What an agent already remembers, read as facts for `memfold import`: Claude Code's
//! auto-memory folder (`MEMORY.md` and its topic files), Codex's memories folder, Gemini CLI's
//! `GEMINI.md` memories, Cursor's rules, Copilot's instructions, and a mem0 export (`get_all`'s
//! JSON, a list, or one memory per line).
//!
//! Each memory becomes a fact with its source (`claude-code:<file>`, `codex:<file>`,
//! `mem0:<id>`) and, where the file says, its day. A file or line that cannot be read is
//! reported by name and line, and the rest is read.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde_json::Value;

use crate::archive::NewFact;

/// What an import read.
#[derive(Debug, Default)]
pub struct Found {
    pub facts: Vec<NewFact>,
    /// `file:line: why` for each part skipped.
    pub problems: Vec<String>,
}

/// The markdown files under `dir`, sorted (links and hidden folders left alone).
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    files_ending(dir, ".md")
}

/// The files under `dir` whose names end with `suffix`, sorted (links and hidden folders left
/// alone).
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let hidden = name.starts_with('.');
        match entry.file_type() {
            Ok(t) if t.is_dir() && !hidden => out.extend(files_ending(&path, suffix)),
            Ok(t) if t.is_file() && name.ends_with(suffix) => out.push(path),
            _ => {}
        }
    }
    out.sort();
    out
}

/// The day a file was last changed.
fn modified_day(path: &Path) -> Option<NaiveDate> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(chrono::DateTime::<chrono::Local>::from(modified).date_naive())
}

/// A day from an ISO-8601 stamp (`2026-01-02`, `2026-01-02T03:04:05Z`, …).
fn day(stamp: &str) -> Option<NaiveDate> {
    let stamp = stamp.trim().trim_matches('"');
    NaiveDate::parse_from_str(stamp.get(..10)?, "%Y-%m-%d").ok()
}

/// The memories of a markdown file: each list item and each paragraph line, without
/// headings, front matter, link-only index lines and `key: value` bookkeeping lines. The
/// day is the front matter's `modified`, else the nearest `updated_at:` above, else the
/// file's.
fn markdown(path: &Path, source: &str, found: &mut Found) {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            found.problems.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    let mut date = modified_day(path);
    let mut lines = text.lines().enumerate().peekable();
    if lines.peek().is_some_and(|(_, l)| l.trim() == "---") {
        lines.next();
        for (_, line) in lines.by_ref() {
            if line.trim() == "---" {
                break;
            }
            if let Some(stamp) = line.strip_prefix("modified:") {
                date = day(stamp).or(date);
            }
        }
    }
    let mut fenced = false;
    for (_, line) in lines {
        let line = line.trim();
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if let Some(stamp) = line.strip_prefix("updated_at:") {
            date = day(stamp).or(date);
            continue;
        }
        let item = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .or_else(|| line.split_once(". ").filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit())).map(|(_, t)| t))
            .unwrap_or(line)
            .trim();
        let bookkeeping = item.split_once(':').is_some_and(|(k, v)| {
            !k.contains(' ') && k.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !v.trim().contains(' ')
        });
        let link_only = item.starts_with('[') && item.contains("](") && item.ends_with(')') && !item.contains("): ");
        if fenced
            || item.len() < 3
            || line.starts_with('#')
            || line.starts_with('>')
            || line == "---"
            || bookkeeping
            || link_only
        {
            continue;
        }
        found.facts.push(NewFact { text: item.to_string(), date, source: Some(source.to_string()) });
    }
}

/// Claude Code's auto-memory folder: `MEMORY.md` and the topic files beside it.
pub fn claude_code(dir: &Path) -> Found {
    folder(dir, "claude-code", "Claude Code keeps a project's memory in ~/.claude/projects/<project>/memory")
}

/// Codex's memories folder (`~/.codex/memories`): every markdown file in it.
pub fn codex(dir: &Path) -> Found {
    folder(dir, "codex", "Codex keeps its memories in ~/.codex/memories")
}

/// The heading under which Gemini CLI's `save_memory` kept what it was asked to remember.
const GEMINI_HEADING: &str = "## Gemini Added Memories";

/// Gemini CLI's memories: the items under `## Gemini Added Memories` in a `GEMINI.md`
/// (`~/.gemini/GEMINI.md`, where its `save_memory` wrote them; the rest of the file is
/// instructions, not memories).
pub fn gemini(file: &Path) -> Found {
    let mut found = Found::default();
    let text = match std::fs::read(file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            found
                .problems
                .push(format!("{}: {e} (Gemini CLI keeps its memories in ~/.gemini/GEMINI.md)", file.display()));
            return found;
        }
    };
    let date = modified_day(file);
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            inside = trimmed == GEMINI_HEADING;
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ").filter(|_| inside).map(str::trim).filter(|i| i.len() >= 3) {
            found.facts.push(NewFact { text: item.to_string(), date, source: Some("gemini:GEMINI.md".into()) });
        }
    }
    if found.facts.is_empty() {
        found.problems.push(format!("{}: no {GEMINI_HEADING:?} section", file.display()));
    }
    found
}

/// Cursor's rules for the project at `project`: `.cursor/rules/**/*.mdc` (their bodies; the
/// front matter is Cursor's) and the older `.cursorrules`. (Cursor's "Memories" lived on its
/// servers and were retired in 2.1; Cursor asked people to turn them into rules.)
pub fn cursor(project: &Path) -> Found {
    let mut found = Found::default();
    let mut files = files_ending(&project.join(".cursor/rules"), ".mdc");
    files.extend(files_ending(&project.join(".cursor/rules"), ".md"));
    let legacy = project.join(".cursorrules");
    if legacy.is_file() {
        files.push(legacy);
    }
    project_files(project, files, "cursor", "Cursor keeps rules in .cursor/rules/*.mdc", &mut found);
    found
}

/// Copilot's instructions: the project's `.github/copilot-instructions.md` and
/// `.github/instructions/**/*.instructions.md`, and the user's `copilot-instructions.md` in
/// `copilot_home` (Copilot Memory itself lives on GitHub, not in a file).
pub fn copilot(project: &Path, copilot_home: &Path) -> Found {
    let mut found = Found::default();
    let mut files: Vec<PathBuf> =
        [project.join(".github/copilot-instructions.md")].into_iter().filter(|f| f.is_file()).collect();
    files.extend(files_ending(&project.join(".github/instructions"), ".instructions.md"));
    project_files(project, files, "copilot", "Copilot reads .github/copilot-instructions.md", &mut found);
    let user = copilot_home.join("copilot-instructions.md");
    if user.is_file() {
        markdown(&user, "copilot:~/copilot-instructions.md", &mut found);
    }
    found
}

/// The memories of `files` (in `project`), each memory's source `<agent>:<file in the project>`.
fn project_files(project: &Path, files: Vec<PathBuf>, agent: &str, hint: &str, found: &mut Found) {
    if files.is_empty() {
        found.problems.push(format!("{}: nothing to import ({hint})", project.display()));
    }
    for path in files {
        let name = path.strip_prefix(project).unwrap_or(&path).to_string_lossy().into_owned();
        markdown(&path, &format!("{agent}:{name}"), found);
    }
}

/// Every markdown file under `dir`, each memory's source `<agent>:<file>`.
fn folder(dir: &Path, agent: &str, hint: &str) -> Found {
    let mut found = Found::default();
    if !dir.is_dir() {
        found.problems.push(format!("{}: no such folder ({hint})", dir.display()));
        return found;
    }
    for path in markdown_files(dir) {
        let name = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().into_owned();
        markdown(&path, &format!("{agent}:{name}"), &mut found);
    }
    found
}

/// A mem0 export: `{"results": [...]}` or a list of memories (`get_all`), or one memory per
/// line. A memory is `{"id", "memory", "created_at"?, "updated_at"?, …}`.
pub fn mem0(file: &Path) -> Found {
    let mut found = Found::default();
    let name = file.display().to_string();
    let text = match std::fs::read(file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            found.problems.push(format!("{name}: {e}"));
            return found;
        }
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || (trimmed.starts_with('{') && serde_json::from_str::<Value>(&text).is_ok()) {
        let doc: Value = match serde_json::from_str(&text) {
            Ok(doc) => doc,
            Err(e) => {
                found.problems.push(format!("{name}:{}: not valid JSON ({e})", e.line()));
                return found;
            }
        };
        let items = match &doc {
            Value::Array(items) => items.clone(),
            Value::Object(o) if o.contains_key("results") => o["results"].as_array().cloned().unwrap_or_default(),
            Value::Object(_) => vec![doc.clone()],
            _ => Vec::new(),
        };
        // Where each memory starts, for the messages: the line of its id or text.
        for (i, item) in items.iter().enumerate() {
            mem0_item(item, &format!("{name}: memory {}", i + 1), &mut found);
        }
    } else {
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(item) => mem0_item(&item, &format!("{name}:{}", n + 1), &mut found),
                Err(e) => found.problems.push(format!("{name}:{}: not valid JSON ({e})", n + 1)),
            }
        }
    }
    found
}

fn mem0_item(item: &Value, at: &str, found: &mut Found) {
    let Some(text) = item.get("memory").and_then(Value::as_str).filter(|t| !t.trim().is_empty()) else {
        found.problems.push(format!("{at}: no \"memory\" text"));
        return;
    };
    let id = item.get("id").and_then(Value::as_str).unwrap_or("?");
    let date = ["created_at", "updated_at"].iter().find_map(|k| item.get(*k).and_then(Value::as_str).and_then(day));
    found.facts.push(NewFact { text: text.trim().to_string(), date, source: Some(format!("mem0:{id}")) });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_memory_files_give_their_items_and_skip_the_index_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("MEMORY.md"),
            "# Memory Index\n\n## Project\n- [build.md](build.md): npm run build (~45s), Vitest\n- [debugging.md](debugging.md)\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("debugging.md"),
            "---\nname: Debugging patterns\ntype: reference\nmodified: 2026-03-04T10:00:00Z\n---\n\n## Auth Token Issues\n- Refresh token rotation: old token invalidated immediately\n",
        )
        .unwrap();
        let found = claude_code(dir.path());
        let texts: Vec<(&str, &str)> =
            found.facts.iter().map(|f| (f.text.as_str(), f.source.as_deref().unwrap())).collect();
        assert_eq!(
            texts,
            [
                ("[build.md](build.md): npm run build (~45s), Vitest", "claude-code:MEMORY.md"),
                ("Refresh token rotation: old token invalidated immediately", "claude-code:debugging.md"),
            ]
        );
        assert_eq!(found.facts[1].date, NaiveDate::from_ymd_opt(2026, 3, 4));
    }

    #[test]
    fn mem0_exports_in_every_shape_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let wrapped = dir.path().join("export.json");
        std::fs::write(
            &wrapped,
            r#"{"results": [{"id": "a1", "memory": "Prefers pnpm over npm", "created_at": "2026-01-02T03:04:05.123456+00:00"}, {"id": "a2"}]}"#,
        )
        .unwrap();
        let found = mem0(&wrapped);
        assert_eq!(found.facts.len(), 1);
        assert_eq!(found.facts[0].source.as_deref(), Some("mem0:a1"));
        assert_eq!(found.facts[0].date, NaiveDate::from_ymd_opt(2026, 1, 2));
        assert_eq!(found.problems, [format!("{}: memory 2: no \"memory\" text", wrapped.display())]);
        let lines = dir.path().join("export.jsonl");
        std::fs::write(
            &lines,
            "{\"id\":\"b1\",\"memory\":\"Lives in Lisbon\"}\n{broken\n{\"id\":\"b2\",\"memory\":\"Has a cat\"}\n",
        )
        .unwrap();
        let found = mem0(&lines);
        assert_eq!(found.facts.len(), 2);
        assert_eq!(found.problems.len(), 1);
        assert!(found.problems[0].starts_with(&format!("{}:2:", lines.display())), "{:?}", found.problems);
    }
}
