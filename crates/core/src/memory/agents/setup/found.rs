//! What `memfold setup --list` and `doctor` read: which agents and MCP clients this machine
//! has, and where memfold is set up in their files (hooks, plugin, server), with the binary and
//! memory each names and whether that binary is still there.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::{Client, Scope, Target, plugin};
use memfold_store::agents::settings;
use memfold_store::agents::{self, Agent};

/// One part of memfold found in an agent's or client's file.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub file: PathBuf,
    /// `hooks`, `plugin` or `mcp`.
    pub kind: &'static str,
    /// The memfold it runs.
    pub binary: PathBuf,
    /// Whether that binary is still there.
    pub binary_exists: bool,
    /// The memory it names (`--root DIR` or `--home DIR`).
    pub memory: String,
}

/// Every file setup may write for `target`, in either scope (the project: the one `cwd` is in).
pub fn files(target: Target, home: &Path, cwd: &Path) -> Vec<PathBuf> {
    let project = crate::memory::agents::project_folder(cwd);
    match target {
        Target::Mcp(client) => {
            [Scope::User, Scope::Project].iter().filter_map(|s| client.file(*s, home, &project)).collect()
        }
        Target::Agent(agent) => match agent {
            Agent::ClaudeCode => vec![
                home.join(".claude/settings.json"),
                home.join(".claude.json"),
                project.join(".claude/settings.local.json"),
            ],
            Agent::Codex => {
                let codex = agents::codex_home(home);
                vec![codex.join("hooks.json"), codex.join("config.toml")]
            }
            Agent::Gemini => vec![home.join(".gemini/settings.json"), project.join(".gemini/settings.json")],
            Agent::Cursor => vec![
                home.join(".cursor/hooks.json"),
                home.join(".cursor/mcp.json"),
                project.join(".cursor/hooks.json"),
                project.join(".cursor/mcp.json"),
            ],
            Agent::Copilot => {
                let copilot = agents::copilot_home(home);
                let mut files = agents::files_with_extension(&copilot.join("hooks"), "json");
                files.extend(agents::files_with_extension(&project.join(".github/hooks"), "json"));
                files.push(copilot.join("mcp-config.json"));
                files
            }
            Agent::OpenCode => {
                let config = agents::opencode_config(home);
                let mut files = agents::files_with_extension(&config.join("plugins"), "js");
                files.extend(agents::files_with_extension(&project.join(".opencode/plugins"), "js"));
                files.extend([
                    config.join("opencode.json"),
                    config.join("opencode.jsonc"),
                    project.join("opencode.json"),
                ]);
                files
            }
        },
    }
}

/// The first word of a shell command line (a single-quoted word unquoted).
#[cfg(test)]
fn first_word(command: &str) -> String {
    shell_words(command).into_iter().next().unwrap_or_default()
}

/// The words of a shell command line as setup spells them (plain, or single-quoted with `'\''`).
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut any) = (false, false);
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '\'') => quoted = false,
            (false, '\'') => (quoted, any) = (true, true),
            (false, '\\') => word.extend(chars.next()),
            (false, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (_, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The memory a command's words name (`--root DIR`, `--home DIR`).
fn memory_of(words: &[String]) -> String {
    words
        .windows(2)
        .find(|w| w[0] == "--root" || w[0] == "--home")
        .map(|w| format!("{} {}", w[0], w[1]))
        .unwrap_or_else(|| "the default root".into())
}

fn found(file: &Path, kind: &'static str, words: &[String]) -> Installed {
    let binary = PathBuf::from(words.first().cloned().unwrap_or_default());
    Installed { file: file.to_path_buf(), kind, binary_exists: binary.is_file(), binary, memory: memory_of(words) }
}

/// Whether a program is memfold (by its file name).
fn is_memfold(program: &str) -> bool {
    Path::new(program).file_name().is_some_and(|f| f.to_string_lossy().starts_with("memfold"))
}

/// memfold's hooks and servers in a parsed settings document.
fn scan(value: &Value, file: &Path, out: &mut Vec<Installed>) {
    match value {
        Value::String(command) => {
            let words = shell_words(command);
            let hook =
                words.windows(2).any(|w| w[0] == "hook" && memfold_store::agents::HookEvent::parse(&w[1]).is_ok());
            if hook && is_memfold(words.first().map(String::as_str).unwrap_or_default()) {
                out.push(found(file, "hooks", &words));
            }
        }
        Value::Array(items) => items.iter().for_each(|v| scan(v, file, out)),
        Value::Object(object) => {
            let strings = |v: Option<&Value>| -> Vec<String> {
                v.and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            };
            let server = match object.get("command") {
                Some(Value::String(command)) => {
                    Some(std::iter::once(command.clone()).chain(strings(object.get("args"))).collect::<Vec<_>>())
                }
                Some(Value::Array(_)) => Some(strings(object.get("command"))),
                _ => None,
            };
            match server {
                Some(words) if words.iter().any(|w| w == "mcp") && is_memfold(&words[0]) => {
                    out.push(found(file, "mcp", &words))
                }
                _ => object.values().for_each(|v| scan(v, file, out)),
            }
        }
        _ => {}
    }
}

/// Where memfold is set up for `target` on this machine (user scope, and the project of `cwd`).
pub fn installed(target: Target, home: &Path, cwd: &Path) -> Result<Vec<Installed>, String> {
    let mut out = Vec::new();
    for file in files(target, home, cwd) {
        let Some(text) = settings::read(&file)? else { continue };
        let name = file.to_string_lossy();
        if name.ends_with(".js") {
            if let Some(words) = plugin::command_of(&text) {
                out.push(found(&file, "plugin", &words));
            }
            continue;
        }
        let doc: Value = match name.ends_with(".toml") {
            true => text.parse::<toml::Table>().ok().and_then(|t| serde_json::to_value(t).ok()),
            false => settings::parse_jsonc(&text).ok(),
        }
        .ok_or_else(|| format!("{} does not parse", file.display()))?;
        scan(&doc, &file, &mut out);
    }
    Ok(out)
}

/// What `setup --list` says of one agent or client.
#[derive(Debug, Serialize)]
pub struct Listed {
    pub name: String,
    pub title: &'static str,
    /// What tells it is on this machine (a program on PATH, or its folder), if anything.
    pub found: Option<String>,
    pub setup: Vec<Installed>,
    pub problem: Option<String>,
}

fn title(target: Target) -> &'static str {
    match target {
        Target::Agent(agent) => agent.title(),
        Target::Mcp(Client::ClaudeDesktop) => "Claude Desktop",
        Target::Mcp(Client::Vscode) => "VS Code",
        Target::Mcp(Client::Windsurf) => "Windsurf",
        Target::Mcp(Client::Zed) => "Zed",
        Target::Mcp(Client::Cursor) => "Cursor (MCP only)",
    }
}

/// Whether `target` is on this machine: a program on PATH, else the folder it keeps.
fn on_machine(target: Target, home: &Path, cwd: &Path) -> Option<String> {
    match target {
        Target::Agent(agent) => agent
            .programs()
            .iter()
            .find_map(|p| agents::on_path(p))
            .map(|p| p.display().to_string())
            .or_else(|| agent.folder(home).is_dir().then(|| agent.folder(home).display().to_string())),
        Target::Mcp(client) => client
            .file(Scope::User, home, &crate::memory::agents::project_folder(cwd))
            .and_then(|f| f.parent().filter(|d| d.is_dir()).map(|d| d.display().to_string())),
    }
}

/// Every agent and client, whether it is on this machine, and where memfold is set up in its
/// files (a binary that is no longer there is flagged), for `memfold setup --list`.
pub fn listing(cwd: &Path) -> Result<Vec<Listed>, String> {
    let home = agents::user_home()?;
    let targets = Agent::ALL.map(Target::Agent).into_iter().chain(Client::ALL.map(Target::Mcp));
    Ok(targets
        .map(|target| {
            let (setup, problem) = match installed(target, &home, cwd) {
                Ok(setup) => (setup, None),
                Err(e) => (Vec::new(), Some(e)),
            };
            Listed { name: target.name(), title: title(target), found: on_machine(target, &home, cwd), setup, problem }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_command_gives_its_words() {
        assert_eq!(
            shell_words("'/opt/my tools/memfold' --root '/a b/it'\\''s' hook stop"),
            ["/opt/my tools/memfold", "--root", "/a b/it's", "hook", "stop"]
        );
        assert_eq!(first_word("/usr/bin/memfold --root /m hook stop --agent codex"), "/usr/bin/memfold");
        assert_eq!(first_word(r"'/opt/it'\''s/memfold' hook stop"), "/opt/it's/memfold");
    }
}
