//! Setting memfold up in an agent (`memfold setup AGENT`): memfold's hooks (OpenCode: its plugin) and MCP server added to the
//! agent's own settings files; `memfold setup mcp --client CLIENT`: the MCP server alone, for
//! clients without hooks. Each change is merged into what is there (see
//! [`memfold_store::agents::settings`]), each changed file backed up first. A second run changes
//! nothing; `--remove` takes out exactly what setup added; `--dry-run` prints the change and
//! writes nothing. The agent's own memory is never turned off. `memfold setup --list` says which
//! agents this machine has, which are set up, and with which memfold.

mod found;
mod plugin;

use std::path::{Path, PathBuf};

use serde_json::json;

use memfold_store::agents::settings::{self, Handler, Ours};
use memfold_store::agents::{self, Agent, HookEvent, HookLayout};
use memfold_store::config::Config;

pub use found::{Installed, Listed, installed, listing};
pub use memfold_store::agents::settings::Edit;

/// Where the settings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every project of this user (`~/.claude/settings.json`, `~/.gemini/settings.json`, …).
    User,
    /// This project only. Claude Code: the hooks in `.claude/settings.local.json` (which Claude
    /// Code keeps out of git), the server in `~/.claude.json` under the project's path. Gemini
    /// CLI, Cursor, Copilot CLI, OpenCode, VS Code, Zed: the project's own settings folder
    /// (`.gemini/`, `.cursor/`, `.github/hooks/`, `.opencode/`, `.vscode/`, `.zed/`), whose files
    /// then name this machine's binary and memory: keep them out of commits.
    Project,
}

/// An MCP client that takes servers from a settings file and runs no hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeDesktop,
    Vscode,
    Windsurf,
    Zed,
    Cursor,
}

impl Client {
    pub const ALL: [Client; 5] = [Client::ClaudeDesktop, Client::Vscode, Client::Windsurf, Client::Zed, Client::Cursor];

    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::Vscode => "vscode",
            Client::Windsurf => "windsurf",
            Client::Zed => "zed",
            Client::Cursor => "cursor",
        }
    }

    /// The client's settings file for `scope` (none: the client has no project settings).
    fn file(self, scope: Scope, home: &Path, project: &Path) -> Option<PathBuf> {
        let app_support = home.join("Library/Application Support");
        let mac = cfg!(target_os = "macos");
        match (self, scope) {
            (Client::ClaudeDesktop, Scope::User) if mac => Some(app_support.join("Claude/claude_desktop_config.json")),
            (Client::ClaudeDesktop, Scope::User) => {
                Some(agents::config_dir(home).join("Claude/claude_desktop_config.json"))
            }
            (Client::Vscode, Scope::User) if mac => Some(app_support.join("Code/User/mcp.json")),
            (Client::Vscode, Scope::User) => Some(agents::config_dir(home).join("Code/User/mcp.json")),
            (Client::Vscode, Scope::Project) => Some(project.join(".vscode/mcp.json")),
            (Client::Windsurf, Scope::User) => Some(home.join(".codeium/windsurf/mcp_config.json")),
            (Client::Zed, Scope::User) => Some(agents::config_dir(home).join("zed/settings.json")),
            (Client::Zed, Scope::Project) => Some(project.join(".zed/settings.json")),
            (Client::Cursor, Scope::User) => Some(home.join(".cursor/mcp.json")),
            (Client::Cursor, Scope::Project) => Some(project.join(".cursor/mcp.json")),
            (Client::ClaudeDesktop | Client::Windsurf, Scope::Project) => None,
        }
    }

    /// The key of the client's servers, and memfold's entry there.
    fn entry(self, exe: &str, args: &[String]) -> (&'static str, serde_json::Value) {
        match self {
            Client::Vscode => ("servers", json!({ "type": "stdio", "command": exe, "args": args })),
            // `source` is what Zed's mid-2025 releases require; later ones read the same entry
            // without it.
            Client::Zed => ("context_servers", json!({ "source": "custom", "command": exe, "args": args, "env": {} })),
            Client::ClaudeDesktop | Client::Windsurf | Client::Cursor => {
                ("mcpServers", json!({ "command": exe, "args": args }))
            }
        }
    }
}

/// What `setup` sets up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An agent's hooks (or plugin) and its MCP server.
    Agent(Agent),
    /// The MCP server alone, in an MCP client's settings.
    Mcp(Client),
}

impl Target {
    pub fn name(self) -> String {
        match self {
            Target::Agent(agent) => agent.name().to_string(),
            Target::Mcp(client) => format!("mcp --client {}", client.name()),
        }
    }
}

/// What `setup` was asked to do.
#[derive(Debug, Clone)]
pub struct Request {
    pub target: Target,
    pub scope: Scope,
    pub dry_run: bool,
    pub remove: bool,
    /// The configuration file memfold was started with (`--config`, `MEMFOLD_CONFIG`): the
    /// commands setup writes carry it, so the hooks and the server read the same one.
    pub config_file: Option<std::path::PathBuf>,
}

/// A path made absolute (from the current folder), as text.
fn absolute(p: &Path) -> String {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).to_string_lossy().into_owned()
}

/// The memfold command the agent runs: this binary, with the root or home it was set up for
/// and the configuration file it was started with; and what marks that part as this memory's.
fn memfold_args(config: &Config, request: &Request) -> Result<(String, Vec<String>, Ours), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let exe = exe.canonicalize().unwrap_or(exe).to_string_lossy().into_owned();
    let (flag, dir) = match &config.home {
        Some(home) => ("--home", absolute(home)),
        None => ("--root", absolute(&config.root)),
    };
    let folder = Path::new(&dir).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let ours = Ours {
        target: vec![flag.to_string(), dir.clone()],
        spelled: format!("{} {}", shell_word(flag), shell_word(&dir)),
        fallback_name: format!(
            "memfold-{}",
            folder.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect::<String>()
        ),
    };
    let mut args = vec![flag.to_string(), dir];
    if let Some(file) = &request.config_file {
        args.extend(["--config".to_string(), absolute(file)]);
    }
    Ok((exe, args, ours))
}

/// A word for a shell command line (quoted when it holds anything but plain characters).
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:@,".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// memfold's hook handlers for `agent`, in the agent's event names and timeout unit.
fn handlers(exe: &str, args: &[String], agent: Agent) -> Vec<Handler> {
    let prefix: Vec<String> = std::iter::once(exe).chain(args.iter().map(String::as_str)).map(shell_word).collect();
    let millis = agent.hook_layout() == HookLayout::Grouped { millis: true };
    agent
        .events()
        .iter()
        .map(|(event, ours)| {
            // Session end has a budget of its own in Claude Code (1.5 s) and Codex (1 s); the
            // rest answer well within 30 s, the shortest default (a prompt's).
            let seconds = match (agent, *ours) {
                (Agent::ClaudeCode | Agent::Codex, HookEvent::SessionEnd) => None,
                (_, HookEvent::SessionEnd) => Some(10),
                _ => Some(30),
            };
            Handler {
                event,
                matcher: None,
                command: format!("{} hook {ours} --agent {}", prefix.join(" "), agent.name()),
                timeout: seconds.map(|s| if millis { s * 1000 } else { s }),
                name: (agent == Agent::Gemini).then(|| format!("memfold-{ours}")),
            }
        })
        .collect()
}

/// The switch Gemini CLI reads before it runs hooks (on by default since 0.26; an older
/// `tools.enableHooks` is for releases before it).
const GEMINI_SWITCH: [&str; 2] = ["hooksConfig", "enabled"];

/// The edits `request` makes, in the order they are applied, and the switches it turns on.
pub fn plan(config: &Config, request: &Request, cwd: &Path) -> Result<(Vec<Edit>, Vec<String>), String> {
    let home = agents::user_home()?;
    let project = super::project_folder(cwd);
    let (exe, args, ours) = memfold_args(config, request)?;
    let mut server_args = args.clone();
    server_args.push("mcp".into());
    let remove = request.remove;
    let mut switched = Vec::new();
    let agent = match request.target {
        Target::Mcp(client) => {
            let file = client.file(request.scope, &home, &project).ok_or_else(|| {
                format!("{} has no project settings: `memfold setup mcp --client {0}` writes the user's", client.name())
            })?;
            let (key, entry) = client.entry(&exe, &server_args);
            let edit = edit_settings(&file, remove, |doc| match remove {
                true => {
                    settings::remove_server_in(doc, &[], key, &ours);
                    Ok(())
                }
                false => settings::add_server_in(doc, &[], key, entry, &ours),
            })?;
            return Ok((vec![edit], switched));
        }
        Target::Agent(agent) => agent,
    };
    let handlers = handlers(&exe, &args, agent);
    let layout = agent.hook_layout();
    let hooks = |doc: &mut serde_json::Value, remove: bool| match remove {
        true => {
            settings::remove_hooks(doc, &ours, layout);
            Ok(())
        }
        false => settings::add_hooks(doc, &handlers, &ours, layout),
    };
    let hooks_file = |path: &Path, remove: bool| edit_settings(path, remove, |doc| hooks(doc, remove));
    let server_in = |path: &Path, at: &[&str], entry: serde_json::Value, remove: bool| {
        edit_settings(path, remove, |doc| match remove {
            true => {
                settings::remove_json_server(doc, at, &ours);
                Ok(())
            }
            false => settings::add_json_server(doc, at, entry, &ours),
        })
    };
    let stdio = json!({ "type": "stdio", "command": exe, "args": server_args });
    let project_scope = request.scope == Scope::Project;
    let edits = match agent {
        Agent::ClaudeCode if !project_scope => vec![
            hooks_file(&home.join(".claude/settings.json"), remove)?,
            server_in(&home.join(".claude.json"), &[], stdio, remove)?,
        ],
        Agent::ClaudeCode => {
            let key = absolute(&project);
            let mut edits = vec![
                hooks_file(&project.join(".claude/settings.local.json"), remove)?,
                server_in(&home.join(".claude.json"), &["projects", &key], stdio, remove)?,
            ];
            // Earlier versions wrote a project's part into the files a team commits: taken
            // out of them (this memory's part only).
            for legacy in [
                hooks_file(&project.join(".claude/settings.json"), true)?,
                server_in(&project.join(".mcp.json"), &[], json!({}), true)?,
            ] {
                if legacy.changes() {
                    edits.push(legacy);
                }
            }
            edits
        }
        Agent::Codex => {
            if project_scope {
                return Err(
                    "Codex reads project settings only from trusted projects; `setup codex` writes the user's ~/.codex"
                        .into(),
                );
            }
            let codex = agents::codex_home(&home);
            let config_toml = settings::edit_toml(&codex.join("config.toml"), remove, |text| match remove {
                true => settings::remove_toml_server(text, &ours),
                false => settings::add_toml_server(text, &exe, &server_args, &ours),
            })?;
            vec![hooks_file(&codex.join("hooks.json"), remove)?, config_toml]
        }
        Agent::Gemini => {
            // One file holds the hooks, the switch and the server.
            let file = match project_scope {
                true => project.join(".gemini/settings.json"),
                false => home.join(".gemini/settings.json"),
            };
            let entry = json!({ "command": exe, "args": server_args });
            let edit = edit_settings(&file, remove, |doc| {
                hooks(doc, remove)?;
                match remove {
                    true => {
                        settings::switch_off(doc, &GEMINI_SWITCH);
                        settings::remove_json_server(doc, &[], &ours);
                    }
                    false => {
                        switched.extend(settings::switch_on(doc, &GEMINI_SWITCH)?);
                        settings::add_json_server(doc, &[], entry, &ours)?;
                    }
                }
                Ok(())
            })?;
            vec![edit]
        }
        Agent::Cursor => {
            let dir = if project_scope { project.join(".cursor") } else { home.join(".cursor") };
            vec![hooks_file(&dir.join("hooks.json"), remove)?, server_in(&dir.join("mcp.json"), &[], stdio, remove)?]
        }
        Agent::Copilot => {
            // Copilot CLI reads every file of its hooks folder: memfold's is a file of its own.
            let hooks_path = match project_scope {
                true => project.join(".github/hooks/memfold.json"),
                false => agents::copilot_home(&home).join("hooks/memfold.json"),
            };
            let entry = json!({ "type": "local", "command": exe, "args": server_args, "tools": ["*"] });
            vec![
                hooks_file(&hooks_path, remove)?,
                server_in(&agents::copilot_home(&home).join("mcp-config.json"), &[], entry, remove)?,
            ]
        }
        Agent::OpenCode => {
            let (plugins, config_file) = match project_scope {
                true => (project.join(".opencode/plugins"), project.join("opencode.json")),
                false => {
                    let dir = agents::opencode_config(&home);
                    let jsonc = dir.join("opencode.jsonc");
                    let file = if jsonc.is_file() && !dir.join("opencode.json").exists() {
                        jsonc
                    } else {
                        dir.join("opencode.json")
                    };
                    (dir.join("plugins"), file)
                }
            };
            let mut command = vec![exe.clone()];
            command.extend(server_args.iter().cloned());
            let entry = json!({ "type": "local", "command": command, "enabled": true });
            let server = edit_settings(&config_file, remove, |doc| match remove {
                true => {
                    settings::remove_server_in(doc, &[], "mcp", &ours);
                    Ok(())
                }
                false => settings::add_server_in(doc, &[], "mcp", entry, &ours),
            })?;
            vec![plugin::edit(&plugins, &exe, &args, &ours, remove)?, server]
        }
    };
    Ok((edits, switched))
}

/// The edit `change` makes to a JSON settings file (see [`settings::edit_json`]).
fn edit_settings(
    path: &Path,
    remove: bool,
    change: impl FnOnce(&mut serde_json::Value) -> Result<(), String>,
) -> Result<Edit, String> {
    settings::edit_json(path, remove, change)
}

/// Make `edit`: the file written (backed up first: the backup's path), or removed when
/// memfold's part was all it held.
pub fn apply(edit: &Edit) -> Result<Option<PathBuf>, String> {
    settings::apply(edit)
}
