//! `memfold setup claude-code|codex`: memfold's hooks and MCP server added to the agent's
//! own settings files, merged into what is there (see [`crate::store::agents::settings`]),
//! each changed file backed up first. A second run changes nothing; `--remove` takes out
//! exactly what setup added; `--dry-run` prints the change and writes nothing. The agent's
//! own memory is never turned off.

use std::path::Path;

use serde_json::json;

use crate::config::Config;
use crate::planning::diff;
use crate::store::agents::Agent;
use crate::store::agents::settings::{self, EVENTS, Edit, Handler, Ours};

/// Where the settings go for Claude Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// Every project of this user (`~/.claude/settings.json`, `~/.claude.json`).
    User,
    /// This project only, for this user: the hooks in `.claude/settings.local.json` (which
    /// Claude Code keeps out of git), the server in `~/.claude.json` under the project's path.
    /// The commands name this machine's binary and memory, so nothing goes into files a team
    /// commits.
    Project,
}

/// What `setup` was asked to do.
#[derive(Debug, Clone)]
pub struct Request {
    pub agent: Agent,
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
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:@,".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// memfold's hook handlers for `agent`.
fn handlers(exe: &str, args: &[String], agent: Agent) -> Vec<Handler> {
    let prefix: Vec<String> = std::iter::once(exe).chain(args.iter().map(String::as_str)).map(shell_word).collect();
    EVENTS
        .iter()
        .map(|(event, ours)| Handler {
            event,
            matcher: None,
            command: format!("{} hook {ours} --agent {}", prefix.join(" "), agent.name()),
            // Session end has a budget of its own (Claude Code 1.5 s, Codex 1 s); the rest
            // answer well within 30 s, the shortest default (a prompt's).
            timeout: (*ours != "session-end").then_some(30),
        })
        .collect()
}

/// The edits `request` makes, in the order they are applied.
pub fn plan(config: &Config, request: &Request, cwd: &Path) -> Result<Vec<Edit>, String> {
    let home = crate::store::agents::user_home()?;
    let (exe, args, ours) = memfold_args(config, request)?;
    let handlers = handlers(&exe, &args, request.agent);
    let mut server_args = args.clone();
    server_args.push("mcp".into());
    let remove = request.remove;
    let hooks = |path: &Path, remove: bool| {
        settings::edit_json(path, remove, |doc| match remove {
            true => {
                settings::remove_hooks(doc, &ours);
                Ok(())
            }
            false => settings::add_hooks(doc, &handlers, &ours),
        })
    };
    let server = |path: &Path, at: &[&str], remove: bool| {
        let entry = json!({ "type": "stdio", "command": exe, "args": server_args });
        settings::edit_json(path, remove, |doc| match remove {
            true => {
                settings::remove_json_server(doc, at, &ours);
                Ok(())
            }
            false => settings::add_json_server(doc, at, entry, &ours),
        })
    };
    match request.agent {
        Agent::ClaudeCode => match request.scope {
            Scope::User => Ok(vec![
                hooks(&home.join(".claude/settings.json"), remove)?,
                server(&home.join(".claude.json"), &[], remove)?,
            ]),
            Scope::Project => {
                let project = crate::store::home::project_of(cwd);
                let key = absolute(&project);
                let mut edits = vec![
                    hooks(&project.join(".claude/settings.local.json"), remove)?,
                    server(&home.join(".claude.json"), &["projects", &key], remove)?,
                ];
                // Earlier versions wrote a project's part into the files a team commits: taken
                // out of them (this memory's part only).
                for legacy in [
                    hooks(&project.join(".claude/settings.json"), true)?,
                    server(&project.join(".mcp.json"), &[], true)?,
                ] {
                    if legacy.changes() {
                        edits.push(legacy);
                    }
                }
                Ok(edits)
            }
        },
        Agent::Codex => {
            if request.scope == Scope::Project {
                return Err(
                    "Codex reads project settings only from trusted projects; `setup codex` writes the user's ~/.codex"
                        .into(),
                );
            }
            let codex = crate::store::agents::codex_home(&home);
            let config_toml = settings::edit_toml(&codex.join("config.toml"), remove, |text| match remove {
                true => settings::remove_toml_server(text, &ours),
                false => settings::add_toml_server(text, &exe, &server_args, &ours),
            })?;
            Ok(vec![hooks(&codex.join("hooks.json"), remove)?, config_toml])
        }
    }
}

/// Run `setup`: print what changes (and, unless `dry_run`, make it).
pub fn run(config: &Config, request: &Request) -> Result<i32, String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let edits = plan(config, request, &cwd)?;
    for edit in &edits {
        let path = edit.path.display().to_string();
        if !edit.changes() {
            println!("{path}: unchanged");
            continue;
        }
        if request.dry_run {
            let before = edit.before.as_deref().unwrap_or_default();
            let after = edit.after.as_deref().unwrap_or_default();
            print!("{}", diff::unified(before, after, &path, 3));
            continue;
        }
        match settings::apply(edit)? {
            Some(backup) => println!("{path}: changed (the old file is kept as {})", backup.display()),
            None if edit.after.is_none() => println!("{path}: removed (memfold's part was all it held)"),
            None => println!("{path}: created"),
        }
    }
    if !request.dry_run && !request.remove && edits.iter().any(Edit::changes) {
        match request.agent {
            Agent::ClaudeCode => println!(
                "Claude Code now recalls memory at session start and for each prompt, and captures each session \
                 (its own auto memory is left as it is). Check with /hooks and /mcp in Claude Code."
            ),
            Agent::Codex => println!(
                "Codex asks you to trust new hooks once: open /hooks in Codex and trust memfold's. Its own memories \
                 are left as they are."
            ),
        }
    }
    Ok(0)
}
