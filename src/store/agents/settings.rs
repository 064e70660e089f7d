//! The agents' settings files that `memfold setup` edits: Claude Code's `settings.json`,
//! `.mcp.json` and `~/.claude.json`, Codex's `hooks.json` and `config.toml`.
//!
//! An edit adds memfold's part to what is there and takes out exactly that part again:
//! every other hook, server, permission and key is kept, and so is the formatting where the
//! format allows (JSON keeps its key order and indent; TOML keeps its comments and layout).
//! memfold's hook handlers are known by their command (`… memfold … hook <event>`), its server
//! by its name, so a second run changes nothing and `--remove` finds them again.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// One hook handler memfold adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Handler {
    /// The agent's event name (`SessionStart`, …).
    pub event: &'static str,
    pub matcher: Option<&'static str>,
    pub command: String,
    pub timeout: Option<u64>,
}

/// The events memfold's hooks answer, by the names the agents give them, with memfold's own.
pub const EVENTS: [(&str, &str); 6] = [
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "user-prompt-submit"),
    ("Stop", "stop"),
    ("PreCompact", "pre-compact"),
    ("PostCompact", "post-compact"),
    ("SessionEnd", "session-end"),
];

/// Whether a handler's command is one memfold's setup wrote.
fn is_ours(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.iter().any(|w| w.contains("memfold"))
        && words.windows(2).any(|w| w[0] == "hook" && EVENTS.iter().any(|(_, ours)| w[1] == *ours))
}

/// Add `handlers` to the `hooks` of a settings document (Claude Code's settings, Codex's
/// `hooks.json`): each in a group of its own; a handler of memfold's already there is
/// updated in place.
pub fn add_hooks(doc: &mut Value, handlers: &[Handler]) -> Result<(), String> {
    let root = doc.as_object_mut().ok_or("the settings are not a JSON object")?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks.as_object_mut().ok_or("\"hooks\" is not an object")?;
    for handler in handlers {
        let groups = hooks.entry(handler.event).or_insert_with(|| json!([]));
        let groups = groups.as_array_mut().ok_or_else(|| format!("\"hooks\".{:?} is not a list", handler.event))?;
        let mut entry = Map::new();
        entry.insert("type".into(), json!("command"));
        entry.insert("command".into(), json!(handler.command));
        if let Some(timeout) = handler.timeout {
            entry.insert("timeout".into(), json!(timeout));
        }
        let existing = groups.iter_mut().find_map(|group| {
            group.get_mut("hooks")?.as_array_mut()?.iter_mut().find(|h| h.get("command").and_then(Value::as_str).is_some_and(is_ours))
        });
        match existing {
            Some(found) => *found = Value::Object(entry),
            None => {
                let mut group = Map::new();
                if let Some(matcher) = handler.matcher {
                    group.insert("matcher".into(), json!(matcher));
                }
                group.insert("hooks".into(), json!([Value::Object(entry)]));
                groups.push(Value::Object(group));
            }
        }
    }
    Ok(())
}

/// Take memfold's handlers out of a settings document, and the groups, events and `hooks`
/// object they leave empty.
pub fn remove_hooks(doc: &mut Value) {
    let Some(root) = doc.as_object_mut() else { return };
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else { return };
    for groups in hooks.values_mut() {
        let Some(groups) = groups.as_array_mut() else { continue };
        groups.retain_mut(|group| {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else { return true };
            let before = handlers.len();
            handlers.retain(|h| !h.get("command").and_then(Value::as_str).is_some_and(is_ours));
            !(handlers.is_empty() && before > 0)
        });
    }
    hooks.retain(|_, groups| groups.as_array().is_none_or(|g| !g.is_empty()));
    if hooks.is_empty() {
        root.remove("hooks");
    }
}

/// Set server `name` in a JSON document's `mcpServers`.
pub fn add_json_server(doc: &mut Value, name: &str, server: Value) -> Result<(), String> {
    let root = doc.as_object_mut().ok_or("the settings are not a JSON object")?;
    let servers = root.entry("mcpServers").or_insert_with(|| json!({}));
    servers.as_object_mut().ok_or("\"mcpServers\" is not an object")?.insert(name.to_string(), server);
    Ok(())
}

/// Take server `name` out of a JSON document's `mcpServers` (and `mcpServers` if it is left
/// empty).
pub fn remove_json_server(doc: &mut Value, name: &str) {
    let Some(root) = doc.as_object_mut() else { return };
    let Some(servers) = root.get_mut("mcpServers").and_then(Value::as_object_mut) else { return };
    servers.shift_remove(name);
    if servers.is_empty() {
        root.remove("mcpServers");
    }
}

/// Set `[mcp_servers.<name>]` in a Codex `config.toml`, keeping its comments and layout.
pub fn add_toml_server(text: &str, name: &str, command: &str, args: &[String]) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        toml_edit::Item::Table(table)
    });
    let servers = servers.as_table_mut().ok_or("mcp_servers is not a table")?;
    let mut server = toml_edit::Table::new();
    server["command"] = toml_edit::value(command);
    let mut list = toml_edit::Array::new();
    for arg in args {
        list.push(arg.as_str());
    }
    server["args"] = toml_edit::value(list);
    match servers.get_mut(name).and_then(toml_edit::Item::as_table_mut) {
        Some(existing) => {
            existing["command"] = server["command"].clone();
            existing["args"] = server["args"].clone();
        }
        None => {
            servers.insert(name, toml_edit::Item::Table(server));
        }
    }
    let mut out = doc.to_string();
    if !text.is_empty() && !text.ends_with('\n') && out.starts_with(text) {
        // A file without a final newline gets one before the table memfold adds.
        out.insert(text.len(), '\n');
    }
    Ok(out)
}

/// Take `[mcp_servers.<name>]` out of a Codex `config.toml` (and `mcp_servers` if memfold's
/// server was all it held and it had no header of its own).
pub fn remove_toml_server(text: &str, name: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
    if let Some(servers) = doc.get_mut("mcp_servers").and_then(toml_edit::Item::as_table_mut) {
        servers.remove(name);
        if servers.is_empty() && servers.is_implicit() {
            doc.remove("mcp_servers");
        }
    }
    Ok(doc.to_string())
}

/// A change to one settings file: its content before (none: no file) and after (none: no
/// file).
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Edit {
    pub fn changes(&self) -> bool {
        self.before != self.after
    }
}

/// Read a settings file (`None` when there is none).
pub fn read(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| format!("{} is not UTF-8", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// The edit `change` makes to the JSON file at `path`. The file keeps its indent and key
/// order; a file the change leaves an empty object is removed when `remove` (what `setup`
/// made, it takes away).
pub fn edit_json(path: &Path, remove: bool, change: impl FnOnce(&mut Value) -> Result<(), String>) -> Result<Edit, String> {
    let before = read(path)?;
    let mut doc: Value = match before.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(text) => serde_json::from_str(text).map_err(|e| format!("{} is not valid JSON ({e}); nothing was changed", path.display()))?,
        None => json!({}),
    };
    let was = doc.clone();
    change(&mut doc).map_err(|e| format!("{}: {e}", path.display()))?;
    let after = if doc == was {
        before.clone()
    } else if remove && doc.as_object().is_some_and(Map::is_empty) {
        None
    } else {
        Some(pretty(&doc, before.as_deref()))
    };
    Ok(Edit { path: path.to_path_buf(), before, after })
}

/// The edit `change` makes to the TOML file at `path`.
pub fn edit_toml(path: &Path, remove: bool, change: impl FnOnce(&str) -> Result<String, String>) -> Result<Edit, String> {
    let before = read(path)?;
    let text = before.clone().unwrap_or_default();
    let changed = change(&text).map_err(|e| format!("{} is not valid TOML ({e}); nothing was changed", path.display()))?;
    let after = if changed == text {
        before.clone()
    } else if remove && before.is_none() && changed.trim().is_empty() {
        None
    } else {
        Some(changed)
    };
    Ok(Edit { path: path.to_path_buf(), before, after })
}

/// `doc` as JSON in the indent of `like` (two spaces when there is nothing to be like),
/// ending with a newline.
fn pretty(doc: &Value, like: Option<&str>) -> String {
    let indent: String = like
        .and_then(|t| t.lines().nth(1))
        .map(|l| l.chars().take_while(|c| *c == ' ' || *c == '\t').collect())
        .filter(|i: &String| !i.is_empty())
        .unwrap_or_else(|| "  ".into());
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(doc, &mut serializer).expect("a JSON value serialises");
    let mut text = String::from_utf8(out).expect("JSON is UTF-8");
    if like.is_none_or(|t| t.ends_with('\n')) {
        text.push('\n');
    }
    text
}

/// Make an edit: the old file is first copied beside it (`<name>.memfold-backup-<time>`),
/// then the new content written atomically (or the file removed). The backup's path, if any.
pub fn apply(edit: &Edit) -> Result<Option<PathBuf>, String> {
    if !edit.changes() {
        return Ok(None);
    }
    let io = |e: std::io::Error| format!("{}: {e}", edit.path.display());
    let backup = match &edit.before {
        Some(before) => {
            let name = edit.path.file_name().unwrap_or_default().to_string_lossy();
            let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
            let backup = edit.path.with_file_name(format!("{name}.memfold-backup-{stamp}"));
            std::fs::write(&backup, before).map_err(io)?;
            Some(backup)
        }
        None => None,
    };
    match &edit.after {
        Some(after) => {
            if let Some(parent) = edit.path.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            crate::store::atomic::write_atomic(&edit.path, after.as_bytes(), None).map_err(|e| e.to_string())?;
        }
        None => std::fs::remove_file(&edit.path).map_err(io)?,
    }
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handlers() -> Vec<Handler> {
        EVENTS
            .iter()
            .map(|(event, ours)| Handler {
                event,
                matcher: None,
                command: format!("/usr/bin/memfold hook {ours} --agent claude-code"),
                timeout: Some(10),
            })
            .collect()
    }

    #[test]
    fn hooks_are_added_once_and_removed_exactly() {
        let original = json!({
            "permissions": {"allow": ["Bash(npm test)"]},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
            "model": "opus"
        });
        let mut doc = original.clone();
        add_hooks(&mut doc, &handlers()).unwrap();
        let once = doc.clone();
        add_hooks(&mut doc, &handlers()).unwrap();
        assert_eq!(doc, once, "a second run changes nothing");
        assert_eq!(doc["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(doc["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done");
        remove_hooks(&mut doc);
        assert_eq!(doc, original);
        assert_eq!(serde_json::to_string(&doc).unwrap(), serde_json::to_string(&original).unwrap(), "key order kept");
    }

    #[test]
    fn only_memfold_hook_commands_are_ours() {
        assert!(is_ours("'/opt/memfold/bin/memfold' --home /h hook stop --agent codex"));
        assert!(!is_ours("memfold-notes stop"));
        assert!(!is_ours("/usr/bin/other hook stop"));
        assert!(!is_ours("memfold search hook"));
    }

    #[test]
    fn a_toml_config_keeps_its_comments_and_loses_only_memfold() {
        let original = "# my codex settings\nmodel = \"gpt-5\" # the default\n\n[mcp_servers.figma]\nurl = \"https://mcp.figma.com/mcp\"\nbearer_token_env_var = \"FIGMA_OAUTH_TOKEN\"\n";
        let args = vec!["mcp".to_string()];
        let added = add_toml_server(original, "memfold", "/usr/bin/memfold", &args).unwrap();
        assert!(added.starts_with(original), "{added}");
        assert!(added.contains("[mcp_servers.memfold]"), "{added}");
        assert_eq!(add_toml_server(&added, "memfold", "/usr/bin/memfold", &args).unwrap(), added);
        assert_eq!(remove_toml_server(&added, "memfold").unwrap(), original);
        let alone = add_toml_server("model = \"o3\"", "memfold", "/usr/bin/memfold", &args).unwrap();
        assert!(!alone.contains("[mcp_servers]\n"), "{alone}");
        assert_eq!(remove_toml_server(&alone, "memfold").unwrap().trim_end(), "model = \"o3\"");
    }

    #[test]
    fn json_keeps_its_indent_and_an_emptied_new_file_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{\n    \"model\": \"opus\"\n}\n").unwrap();
        let edit = edit_json(&path, false, |doc| add_json_server(doc, "memfold", json!({"command": "memfold"}))).unwrap();
        assert!(edit.after.as_deref().unwrap().contains("\n    \"mcpServers\": {\n        \"memfold\""), "{:?}", edit.after);
        let fresh = dir.path().join(".mcp.json");
        let add = edit_json(&fresh, false, |doc| add_json_server(doc, "memfold", json!({"command": "memfold"}))).unwrap();
        apply(&add).unwrap();
        let remove = edit_json(&fresh, true, |doc| {
            remove_json_server(doc, "memfold");
            Ok(())
        })
        .unwrap();
        assert_eq!(remove.after, None);
        apply(&remove).unwrap();
        assert!(!fresh.exists());
    }
}
