//! The agents' settings files that `memfold setup` edits: Claude Code's `settings.json`,
//! `.mcp.json` and `~/.claude.json`, Codex's `hooks.json` and `config.toml`, Gemini CLI's
//! `settings.json`, Cursor's and Copilot CLI's `hooks.json` files, OpenCode's plugin and
//! `opencode.json`, and the MCP clients' server lists.
//!
//! An edit adds memfold's part to what is there and takes out exactly that part again:
//! every other hook, server, permission and key is kept, and so is the text around memfold's
//! part (JSON and JSONC keep their comments, trailing commas, layout and key order; TOML its
//! comments and layout).
//! memfold's hook handlers are known by their command (`… hook <event>` naming this memory's
//! root or home, [`Ours`]), its server by its arguments, so a second run changes nothing,
//! `--remove` finds them again, and neither touches hooks wired by hand or another memory's.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::HookLayout;

/// One hook handler memfold adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Handler {
    /// The agent's event name (`SessionStart`, `beforeSubmitPrompt`, …).
    pub event: &'static str,
    pub matcher: Option<&'static str>,
    pub command: String,
    /// In the agent's unit (seconds, or milliseconds for Gemini CLI).
    pub timeout: Option<u64>,
    /// A name for the handler, where the agent shows one (Gemini CLI).
    pub name: Option<String>,
}

/// What marks the part `setup` wrote for one memory: the words that name its root or home in
/// every command and server it wrote (`--root /abs/root`, `--home /abs/home`, each word as a
/// shell command line spells it). A handler or a server without them is not memfold's to
/// touch: hooks wired by hand, and the part `setup` wrote for another root, are left alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Ours {
    /// The words, as a command's arguments hold them (`["--root", "/abs/root"]`).
    pub target: Vec<String>,
    /// The same words as a shell command line spells them.
    pub spelled: String,
    /// A name for the server when `memfold` is another memory's (`memfold-<folder>`).
    pub fallback_name: String,
}

impl Ours {
    /// Whether a hook command is memfold's for this memory: a memfold hook event, and the words.
    fn command(&self, command: &str) -> bool {
        let words: Vec<&str> = command.split_whitespace().collect();
        let hook = words.windows(2).any(|w| w[0] == "hook" && crate::agents::HookEvent::parse(w[1]).is_ok());
        hook && format!(" {command} ").contains(&format!(" {} ", self.spelled))
    }

    /// Whether a server's arguments name this memory.
    fn args<'a>(&self, args: impl IntoIterator<Item = &'a str>) -> bool {
        let args: Vec<&str> = args.into_iter().collect();
        args.windows(self.target.len()).any(|w| w.iter().zip(&self.target).all(|(a, b)| a == b))
    }

    /// Whether a JSON server entry names this memory: in its `args`, or in its `command` where
    /// that is the whole command line as a list (OpenCode).
    fn json_server(&self, server: &Value) -> bool {
        let words =
            |key: &str| server.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
        self.args(words("args")) || self.args(words("command"))
    }

    /// Whether the words of a command line (a plugin's) name this memory.
    pub fn words<'a>(&self, words: impl IntoIterator<Item = &'a str>) -> bool {
        self.args(words)
    }

    /// The name for this memory's server among `names` (taken, with whether each is ours):
    /// the one it has, else `memfold` when free, else the fallback (numbered if taken).
    fn server_name<'a>(&self, names: impl Iterator<Item = (&'a str, bool)>) -> String {
        let names: Vec<(&str, bool)> = names.collect();
        if let Some((name, _)) = names.iter().find(|(_, ours)| *ours) {
            return name.to_string();
        }
        let taken = |n: &str| names.iter().any(|(name, _)| *name == n);
        if !taken("memfold") {
            return "memfold".into();
        }
        (1..)
            .map(|i| if i == 1 { self.fallback_name.clone() } else { format!("{}-{i}", self.fallback_name) })
            .find(|n| !taken(n))
            .expect("a free name")
    }
}

/// The command of a handler entry, under the key `layout` gives it.
fn entry_command(entry: &Value, layout: HookLayout) -> Option<&str> {
    let key = match layout {
        HookLayout::Flat { command, .. } => command,
        _ => "command",
    };
    entry.get(key).and_then(Value::as_str)
}

/// One handler as the agent's settings hold it.
fn entry(handler: &Handler, layout: HookLayout) -> Value {
    let mut entry = Map::new();
    match layout {
        HookLayout::Flat { command, timeout, typed } => {
            if typed {
                entry.insert("type".into(), json!("command"));
            }
            entry.insert(command.into(), json!(handler.command));
            if let Some(seconds) = handler.timeout {
                entry.insert(timeout.into(), json!(seconds));
            }
        }
        _ => {
            if let Some(name) = &handler.name {
                entry.insert("name".into(), json!(name));
            }
            entry.insert("type".into(), json!("command"));
            entry.insert("command".into(), json!(handler.command));
            if let Some(timeout) = handler.timeout {
                entry.insert("timeout".into(), json!(timeout));
            }
        }
    }
    Value::Object(entry)
}

/// Add `handlers` to the `hooks` of a settings document (Claude Code's settings, Codex's,
/// Cursor's and Copilot CLI's `hooks.json`, Gemini CLI's settings): each in a group of its own
/// where the agent groups handlers; a handler this memory's setup wrote before is updated in
/// place. A flat hooks file gets its `"version": 1` when it has none.
pub fn add_hooks(doc: &mut Value, handlers: &[Handler], ours: &Ours, layout: HookLayout) -> Result<(), String> {
    let root = doc.as_object_mut().ok_or("the settings are not a JSON object")?;
    if matches!(layout, HookLayout::Flat { .. }) && !root.contains_key("version") {
        let rest = std::mem::take(root);
        root.insert("version".into(), json!(1));
        root.extend(rest);
    }
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks.as_object_mut().ok_or("\"hooks\" is not an object")?;
    for handler in handlers {
        let list = hooks.entry(handler.event).or_insert_with(|| json!([]));
        let list = list.as_array_mut().ok_or_else(|| format!("\"hooks\".{:?} is not a list", handler.event))?;
        let new = entry(handler, layout);
        let mine = |h: &Value| entry_command(h, layout).is_some_and(|c| ours.command(c));
        let existing = match layout {
            HookLayout::Flat { .. } => list.iter_mut().find(|h| mine(h)),
            _ => list.iter_mut().find_map(|group| group.get_mut("hooks")?.as_array_mut()?.iter_mut().find(|h| mine(h))),
        };
        match (existing, layout) {
            (Some(found), _) => *found = new,
            (None, HookLayout::Flat { .. }) => list.push(new),
            (None, _) => {
                let mut group = Map::new();
                if let Some(matcher) = handler.matcher {
                    group.insert("matcher".into(), json!(matcher));
                }
                group.insert("hooks".into(), json!([new]));
                list.push(Value::Object(group));
            }
        }
    }
    Ok(())
}

/// Take this memory's handlers out of a settings document, and the groups, events and `hooks`
/// object they leave empty (with a flat file's `version`, when nothing else is left).
pub fn remove_hooks(doc: &mut Value, ours: &Ours, layout: HookLayout) {
    let Some(root) = doc.as_object_mut() else { return };
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else { return };
    let mine = |h: &Value| entry_command(h, layout).is_some_and(|c| ours.command(c));
    let mut emptied = Vec::new();
    for (event, list) in hooks.iter_mut() {
        let Some(list) = list.as_array_mut() else { continue };
        let before = list.len();
        match layout {
            HookLayout::Flat { .. } => list.retain(|h| !mine(h)),
            _ => list.retain_mut(|group| {
                let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else { return true };
                let before = handlers.len();
                handlers.retain(|h| !mine(h));
                !(handlers.is_empty() && before > 0)
            }),
        }
        if list.is_empty() && before > 0 {
            emptied.push(event.clone());
        }
    }
    for event in emptied {
        hooks.shift_remove(&event);
    }
    if hooks.is_empty() {
        root.shift_remove("hooks");
        if matches!(layout, HookLayout::Flat { .. }) && root.len() == 1 && root.get("version") == Some(&json!(1)) {
            root.shift_remove("version");
        }
    }
}

/// Turn on a switch the agent needs for hooks (`["hooksConfig", "enabled"]`): the switch's
/// name when it was not on.
pub fn switch_on(doc: &mut Value, at: &[&str]) -> Result<Option<String>, String> {
    let (last, parents) = at.split_last().expect("a switch has a name");
    let object = object_at(doc, parents)?;
    if object.get(*last) == Some(&json!(true)) {
        return Ok(None);
    }
    object.insert(last.to_string(), json!(true));
    Ok(Some(at.join(".")))
}

/// The object at the path of keys `at` in a JSON document (`[]`: the top), each made if
/// missing.
fn object_at<'a>(doc: &'a mut Value, at: &[&str]) -> Result<&'a mut Map<String, Value>, String> {
    let mut node = doc;
    for key in at {
        node = node
            .as_object_mut()
            .ok_or_else(|| format!("{key:?}'s parent is not an object"))?
            .entry(key.to_string())
            .or_insert_with(|| json!({}));
    }
    match at.last() {
        Some(key) => node.as_object_mut().ok_or_else(|| format!("{key:?} is not an object")),
        None => node.as_object_mut().ok_or_else(|| "the settings are not a JSON object".into()),
    }
}

/// Take back a switch [`switch_on`] set, where it is all its object holds (a switch the person
/// set among others of their own is theirs).
pub fn switch_off(doc: &mut Value, at: &[&str]) {
    let Some((parent, _)) = at.split_first() else { return };
    let Some(object) = doc.as_object_mut() else { return };
    let expected = at[1..].iter().rev().fold(json!(true), |inner, key| json!({ *key: inner }));
    if at.len() > 1 && object.get(*parent) == Some(&expected) {
        object.shift_remove(*parent);
    }
}

/// The `mcpServers` object of a JSON document, at `at` (a path of keys: `[]` for the top,
/// `["projects", "/abs/project"]` for Claude Code's servers of one project), made if missing.
fn servers_at<'a>(doc: &'a mut Value, at: &[&str], key: &str) -> Result<&'a mut Map<String, Value>, String> {
    object_at(doc, at)?
        .entry(key)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| format!("{key:?} is not an object"))
}

/// Set this memory's server in a JSON document's `mcpServers` (at `at`, see [`servers_at`]),
/// under the name it has there, else `memfold` when that is free, else a name of its own.
pub fn add_json_server(doc: &mut Value, at: &[&str], server: Value, ours: &Ours) -> Result<(), String> {
    add_server_in(doc, at, "mcpServers", server, ours)
}

/// [`add_json_server`] for a client whose list of servers has another key (`servers` in VS
/// Code, `context_servers` in Zed, `mcp` in OpenCode).
pub fn add_server_in(doc: &mut Value, at: &[&str], key: &str, server: Value, ours: &Ours) -> Result<(), String> {
    let servers = servers_at(doc, at, key)?;
    let name = ours.server_name(servers.iter().map(|(name, s)| (name.as_str(), ours.json_server(s))));
    servers.insert(name, server);
    Ok(())
}

/// Take this memory's server out of a JSON document's `mcpServers` (at `at`), and the objects
/// it leaves empty.
pub fn remove_json_server(doc: &mut Value, at: &[&str], ours: &Ours) {
    remove_server_in(doc, at, "mcpServers", ours)
}

/// [`remove_json_server`] for a list of servers under `key`.
pub fn remove_server_in(doc: &mut Value, at: &[&str], key: &str, ours: &Ours) {
    fn prune(node: &mut Value, at: &[&str], key: &str, ours: &Ours) {
        let Some(object) = node.as_object_mut() else { return };
        match at.split_first() {
            Some((step, rest)) => {
                let Some(child) = object.get_mut(*step) else { return };
                prune(child, rest, key, ours);
                if child.as_object().is_some_and(Map::is_empty) {
                    object.shift_remove(*step);
                }
            }
            None => {
                let Some(servers) = object.get_mut(key).and_then(Value::as_object_mut) else { return };
                servers.retain(|_, s| !ours.json_server(s));
                if servers.is_empty() {
                    object.shift_remove(key);
                }
            }
        }
    }
    prune(doc, at, key, ours);
}

/// Set this memory's `[mcp_servers.<name>]` in a Codex `config.toml`, keeping its comments and
/// layout.
pub fn add_toml_server(text: &str, command: &str, args: &[String], ours: &Ours) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut table = toml_edit::Table::new();
        table.set_implicit(true);
        toml_edit::Item::Table(table)
    });
    let servers = servers.as_table_mut().ok_or("mcp_servers is not a table")?;
    let name = ours.server_name(servers.iter().map(|(name, item)| (name, toml_server_is(item, ours))));
    let mut server = toml_edit::Table::new();
    server["command"] = toml_edit::value(command);
    let mut list = toml_edit::Array::new();
    for arg in args {
        list.push(arg.as_str());
    }
    server["args"] = toml_edit::value(list);
    match servers.get_mut(&name).and_then(toml_edit::Item::as_table_mut) {
        Some(existing) => {
            existing["command"] = server["command"].clone();
            existing["args"] = server["args"].clone();
        }
        None => {
            servers.insert(&name, toml_edit::Item::Table(server));
        }
    }
    let mut out = doc.to_string();
    if !text.is_empty() && !text.ends_with('\n') && out.starts_with(text) {
        // A file without a final newline gets one before the table memfold adds.
        out.insert(text.len(), '\n');
    }
    Ok(out)
}

/// Whether a Codex server table names this memory.
fn toml_server_is(item: &toml_edit::Item, ours: &Ours) -> bool {
    let args = item.get("args").and_then(toml_edit::Item::as_array);
    args.is_some_and(|a| ours.args(a.iter().filter_map(toml_edit::Value::as_str)))
}

/// Take this memory's `[mcp_servers.<name>]` out of a Codex `config.toml` (and `mcp_servers`
/// if memfold's server was all it held and it had no header of its own).
pub fn remove_toml_server(text: &str, ours: &Ours) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
    if let Some(servers) = doc.get_mut("mcp_servers").and_then(toml_edit::Item::as_table_mut) {
        let mine: Vec<String> =
            servers.iter().filter(|(_, item)| toml_server_is(item, ours)).map(|(name, _)| name.to_string()).collect();
        for name in mine {
            servers.remove(&name);
        }
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

/// A settings file's JSON, comments and trailing commas allowed (JSONC: Zed's, VS Code's,
/// OpenCode's and Gemini CLI's settings may hold them).
pub fn parse_jsonc(text: &str) -> Result<Value, String> {
    let root = jsonc_parser::cst::CstRootNode::parse(text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| e.to_string())?;
    Ok(root.value().and_then(|v| v.to_serde_value()).unwrap_or(Value::Null))
}

/// `was`'s text changed in place to read as `now`: only what differs is touched, so comments,
/// layout and the order of what is there stay as the person wrote them. `None` when the text
/// cannot be read that way (the caller writes the whole document).
fn reshape(text: &str, was: &Value, now: &Value) -> Option<String> {
    use jsonc_parser::cst::CstRootNode;
    let root = CstRootNode::parse(text, &jsonc_parser::ParseOptions::default()).ok()?;
    let object = root.value()?.as_object()?;
    reshape_object(&object, was.as_object()?, now.as_object()?)?;
    let out = root.to_string();
    (parse_jsonc(&out).ok()? == *now).then_some(out)
}

fn reshape_object(
    object: &jsonc_parser::cst::CstObject,
    was: &Map<String, Value>,
    now: &Map<String, Value>,
) -> Option<()> {
    for key in was.keys().filter(|k| !now.contains_key(*k)) {
        object.get(key)?.remove();
    }
    for (index, (key, value)) in now.iter().enumerate() {
        let Some(old) = was.get(key) else {
            object.insert(index, key, input(value));
            continue;
        };
        if old == value {
            continue;
        }
        let prop = object.get(key)?;
        let done = match (old, value, prop.value()) {
            (Value::Object(o), Value::Object(n), Some(node)) => {
                node.as_object().and_then(|obj| reshape_object(&obj, o, n))
            }
            (Value::Array(o), Value::Array(n), Some(node)) => node.as_array().and_then(|arr| reshape_array(&arr, o, n)),
            _ => None,
        };
        if done.is_none() {
            prop.set_value(input(value));
        }
    }
    Some(())
}

/// An array changed in place where `now` adds to its end, leaves out some of its elements, or
/// changes elements where they stand; else `None` (the caller sets it whole).
fn reshape_array(array: &jsonc_parser::cst::CstArray, was: &[Value], now: &[Value]) -> Option<()> {
    let elements = array.elements();
    if elements.len() != was.len() {
        return None;
    }
    if now.len() >= was.len() && now[..was.len()] == *was {
        for value in &now[was.len()..] {
            array.append(input(value));
        }
        return Some(());
    }
    if now.len() < was.len() {
        let mut next = 0;
        let mut gone = Vec::new();
        for (element, value) in elements.into_iter().zip(was) {
            match now.get(next) == Some(value) {
                true => next += 1,
                false => gone.push(element),
            }
        }
        if next != now.len() {
            return None;
        }
        gone.into_iter().for_each(|e| e.remove());
        return Some(());
    }
    if now.len() == was.len() {
        for ((element, old), new) in elements.into_iter().zip(was).zip(now) {
            if old == new {
                continue;
            }
            match (old, new) {
                (Value::Object(o), Value::Object(n)) => reshape_object(&element.as_object()?, o, n)?,
                (Value::Array(o), Value::Array(n)) => reshape_array(&element.as_array()?, o, n)?,
                _ => return None,
            }
        }
        return Some(());
    }
    None
}

/// A JSON value as the CST takes it.
fn input(value: &Value) -> jsonc_parser::cst::CstInputValue {
    use jsonc_parser::cst::CstInputValue;
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
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

/// The edit `change` makes to the JSON file at `path` (comments and trailing commas allowed).
/// The file is changed in place where it differs, keeping its comments, layout and key order
/// ([`reshape`]); a new file is written in two-space JSON; a file the change leaves an empty
/// object is removed when `remove` (what `setup` made, it takes away).
pub fn edit_json(
    path: &Path,
    remove: bool,
    change: impl FnOnce(&mut Value) -> Result<(), String>,
) -> Result<Edit, String> {
    let before = read(path)?;
    let mut doc: Value = match before.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(text) => {
            parse_jsonc(text).map_err(|e| format!("{} is not valid JSON ({e}); nothing was changed", path.display()))?
        }
        None => json!({}),
    };
    let was = doc.clone();
    change(&mut doc).map_err(|e| format!("{}: {e}", path.display()))?;
    let after = if doc == was {
        before.clone()
    } else if remove && doc.as_object().is_some_and(Map::is_empty) {
        None
    } else if let Some(text) = remove.then(|| backed_up_as(path, &doc)).flatten() {
        // What setup changed, taken out again: the file as the person wrote it, byte for byte,
        // when a backup holds exactly that.
        Some(text)
    } else {
        let text = before.as_deref().filter(|t| !t.trim().is_empty());
        match text.and_then(|text| reshape(text, &was, &doc)) {
            Some(reshaped) => Some(reshaped),
            None if text.is_some_and(|t| serde_json::from_str::<Value>(t).is_err()) => {
                return Err(format!(
                    "{}: its comments or layout cannot be kept through this change; nothing was changed",
                    path.display()
                ));
            }
            None => Some(pretty(&doc, before.as_deref())),
        }
    };
    Ok(Edit { path: path.to_path_buf(), before, after })
}

/// The text of the newest backup of `path` (`<name>.memfold-backup-<time>`) that reads as `doc`.
fn backed_up_as(path: &Path, doc: &Value) -> Option<String> {
    let name = format!("{}.memfold-backup-", path.file_name()?.to_string_lossy());
    let mut backups: Vec<PathBuf> = std::fs::read_dir(path.parent()?)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&name))
        .map(|e| e.path())
        .collect();
    backups.sort();
    backups.into_iter().rev().find_map(|backup| {
        let text = std::fs::read_to_string(backup).ok()?;
        (parse_jsonc(&text).ok()? == *doc).then_some(text)
    })
}

/// The edit `change` makes to the TOML file at `path`.
pub fn edit_toml(
    path: &Path,
    remove: bool,
    change: impl FnOnce(&str) -> Result<String, String>,
) -> Result<Edit, String> {
    let before = read(path)?;
    let text = before.clone().unwrap_or_default();
    let changed =
        change(&text).map_err(|e| format!("{} is not valid TOML ({e}); nothing was changed", path.display()))?;
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
            let stamp = crate::sys::clock::Clock::default().wall_now().format("%Y%m%d-%H%M%S");
            // Never over an earlier backup (two runs in one second).
            let backup = (0..)
                .map(|n| match n {
                    0 => edit.path.with_file_name(format!("{name}.memfold-backup-{stamp}")),
                    n => edit.path.with_file_name(format!("{name}.memfold-backup-{stamp}-{n:03}")),
                })
                .find(|p| !p.exists())
                .expect("a free name");
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
            crate::atomic::write_atomic(&edit.path, after.as_bytes(), None).map_err(|e| e.to_string())?;
        }
        None => std::fs::remove_file(&edit.path).map_err(io)?,
    }
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(root: &str) -> Ours {
        Ours {
            target: vec!["--root".into(), root.into()],
            spelled: format!("--root {root}"),
            fallback_name: "memfold-root".into(),
        }
    }

    const GROUPED: HookLayout = HookLayout::Grouped { millis: false };

    fn handlers(root: &str) -> Vec<Handler> {
        crate::agents::Agent::ClaudeCode
            .events()
            .iter()
            .map(|(event, name)| Handler {
                event,
                matcher: None,
                command: format!("/usr/bin/memfold --root {root} hook {name} --agent claude-code"),
                timeout: Some(10),
                name: None,
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
        add_hooks(&mut doc, &handlers("/r"), &ours("/r"), GROUPED).unwrap();
        let once = doc.clone();
        add_hooks(&mut doc, &handlers("/r"), &ours("/r"), GROUPED).unwrap();
        assert_eq!(doc, once, "a second run changes nothing");
        assert_eq!(doc["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(doc["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done");
        remove_hooks(&mut doc, &ours("/r"), GROUPED);
        assert_eq!(doc, original);
        assert_eq!(serde_json::to_string(&doc).unwrap(), serde_json::to_string(&original).unwrap(), "key order kept");
    }

    #[test]
    fn only_this_memorys_hook_commands_are_ours() {
        let mine = ours("/h");
        assert!(mine.command("'/opt/memfold/bin/memfold' --root /h hook stop --agent codex"));
        assert!(mine.command("/new/place/memfold --root /h --config /c.toml hook stop --agent codex"));
        assert!(!mine.command("memfold hook stop"), "wired by hand");
        assert!(!mine.command("/usr/bin/memfold --root /other hook stop --agent codex"), "another memory's");
        assert!(!mine.command("/usr/bin/memfold --root /h2 hook stop"), "a longer path is another folder");
        assert!(!mine.command("memfold-notes stop"));
        assert!(!mine.command("/usr/bin/other --root /h search hook"));
    }

    #[test]
    fn a_second_memorys_setup_keeps_the_first_and_removes_only_itself() {
        let mut doc = json!({});
        add_hooks(&mut doc, &handlers("/a"), &ours("/a"), GROUPED).unwrap();
        add_json_server(&mut doc, &[], json!({"command": "memfold", "args": ["--root", "/a", "mcp"]}), &ours("/a"))
            .unwrap();
        let first = doc.clone();
        add_hooks(&mut doc, &handlers("/b"), &ours("/b"), GROUPED).unwrap();
        add_json_server(&mut doc, &[], json!({"command": "memfold", "args": ["--root", "/b", "mcp"]}), &ours("/b"))
            .unwrap();
        assert_eq!(doc["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(doc["mcpServers"]["memfold"]["args"][1], "/a");
        assert_eq!(doc["mcpServers"]["memfold-root"]["args"][1], "/b");
        remove_hooks(&mut doc, &ours("/b"), GROUPED);
        remove_json_server(&mut doc, &[], &ours("/b"));
        assert_eq!(doc, first);
    }

    #[test]
    fn a_toml_config_keeps_its_comments_and_loses_only_memfold() {
        let original = "# my codex settings\nmodel = \"gpt-5\" # the default\n\n[mcp_servers.figma]\nurl = \"https://mcp.figma.com/mcp\"\nbearer_token_env_var = \"FIGMA_OAUTH_TOKEN\"\n";
        let args = vec!["--root".to_string(), "/r".to_string(), "mcp".to_string()];
        let added = add_toml_server(original, "/usr/bin/memfold", &args, &ours("/r")).unwrap();
        assert!(added.starts_with(original), "{added}");
        assert!(added.contains("[mcp_servers.memfold]"), "{added}");
        assert_eq!(add_toml_server(&added, "/usr/bin/memfold", &args, &ours("/r")).unwrap(), added);
        assert_eq!(remove_toml_server(&added, &ours("/other")).unwrap(), added, "another memory's setup leaves it");
        assert_eq!(remove_toml_server(&added, &ours("/r")).unwrap(), original);
        let alone = add_toml_server("model = \"o3\"", "/usr/bin/memfold", &args, &ours("/r")).unwrap();
        assert!(!alone.contains("[mcp_servers]\n"), "{alone}");
        assert_eq!(remove_toml_server(&alone, &ours("/r")).unwrap().trim_end(), "model = \"o3\"");
    }

    #[test]
    fn json_keeps_its_indent_and_an_emptied_new_file_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{\n    \"model\": \"opus\"\n}\n").unwrap();
        let server = json!({"command": "memfold", "args": ["--root", "/r"]});
        let edit = edit_json(&path, false, |doc| add_json_server(doc, &[], server.clone(), &ours("/r"))).unwrap();
        assert!(
            edit.after.as_deref().unwrap().contains("\n    \"mcpServers\": {\n        \"memfold\""),
            "{:?}",
            edit.after
        );
        let fresh = dir.path().join(".mcp.json");
        let add = edit_json(&fresh, false, |doc| add_json_server(doc, &[], server.clone(), &ours("/r"))).unwrap();
        apply(&add).unwrap();
        let remove = edit_json(&fresh, true, |doc| {
            remove_json_server(doc, &[], &ours("/r"));
            Ok(())
        })
        .unwrap();
        assert_eq!(remove.after, None);
        apply(&remove).unwrap();
        assert!(!fresh.exists());
    }

    #[test]
    fn a_projects_server_goes_under_its_path_and_leaves_the_rest_of_it() {
        let mut doc = json!({"projects": {"/p": {"allowedTools": ["Bash"]}}, "numStartups": 3});
        let original = doc.clone();
        let server = json!({"command": "memfold", "args": ["--root", "/r", "mcp"]});
        add_json_server(&mut doc, &["projects", "/p"], server, &ours("/r")).unwrap();
        assert_eq!(doc["projects"]["/p"]["mcpServers"]["memfold"]["args"][1], "/r");
        assert_eq!(doc["projects"]["/p"]["allowedTools"][0], "Bash");
        remove_json_server(&mut doc, &["projects", "/p"], &ours("/r"));
        assert_eq!(doc, original);
    }
}
