//! What memfold does for the agents it serves (Claude Code, Codex, Gemini CLI, Cursor, Copilot
//! CLI, OpenCode), beside what it does for a person: find the memory a hook works on
//! ([`locate`]), capture what a session said ([`capture`]), keep what a session was told
//! ([`told_at_start`]), install memfold into an agent's settings ([`setup`]) and read an agent's
//! own memory for import ([`import_source`]). The `hook` and `setup` doors parse an agent's payload or
//! a person's flags, call these, and render what they return.

pub mod capture;
pub mod setup;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use memfold_store::Root;
use memfold_store::agents::capture::Told;
use memfold_store::config::{Config, Overrides};
use memfold_store::home::Home;
use memfold_store::listening::Listening;
use memfold_store::project::Project;

pub use memfold_store::agents::imports::Found;
pub use memfold_store::agents::transcript::{Role, Said};
pub use memfold_store::agents::{Agent, HookEvent, user_home};

/// The memory a hook works on, found from the folder the agent runs in.
#[derive(Debug)]
pub struct Located {
    pub root: Root,
    /// The configuration of that memory (a space's own, in a home).
    pub config: Config,
    /// The project's name: its repository's, else its folder's.
    pub project: String,
    /// The home and the space's name, when the memory is a space of a home.
    pub space: Option<(Home, String)>,
    /// Where the daemon serving this memory listens, while one runs.
    pub daemon: Option<SocketAddr>,
    /// What a person should know of the space found (another space of the same repository,
    /// a project the space could not record): the door says it.
    pub notes: Vec<String>,
}

/// The memory for an agent running in `cwd`: with a home, the space of the project there (made
/// on first use when `spaces.auto_create` is on) or `--space`; else the root.
pub fn locate(overrides: &Overrides, cwd: &Path) -> Result<Located, String> {
    let project = Project::of(cwd);
    let base = Config::load(overrides).map_err(|e| format!("configuration: {e}"))?;
    let Some(home_dir) = base.home.clone() else {
        let root = Root::new(&base.root);
        root.check_initialized()?;
        let daemon = Listening::read(&root).map(|l| l.addr);
        return Ok(Located { root, config: base, project: project.name(), space: None, daemon, notes: Vec::new() });
    };
    let home = Home::new(&home_dir);
    let (space, notes) = match base.space.clone() {
        Some(space) => (space, Vec::new()),
        None => {
            let found = super::project::project_space(&base, &home, &project)?;
            (found.name, found.notes)
        }
    };
    let root = home.space(&space)?;
    root.check_initialized()?;
    let config = Config::load(&Overrides { space: Some(space.clone()), ..overrides.clone() })
        .map_err(|e| format!("configuration: {e}"))?;
    let daemon = Listening::read_from(&home.listening_file(), &home.serve_lock()).map(|l| l.addr);
    Ok(Located { root, config, project: project.name(), space: Some((home, space)), daemon, notes })
}

/// The project folder of `dir` (its repository's top, else `dir`), where agents keep a
/// project's settings and memory.
pub fn project_folder(dir: &Path) -> PathBuf {
    memfold_store::home::project_of(dir)
}

/// The first lines of `MEMORY.md`, up to `max` bytes, and how many lines were left unread.
pub fn memory_md_head(root: &Root, max: usize) -> (String, usize) {
    memfold_store::agents::read_head(&root.memory_md(), max)
}

/// Record what a session was told at its start: the entries (id, text) it was handed. A resumed
/// session keeps what it was told before; a new, cleared or compacted one starts again, so its
/// prompts are not handed what its start context holds, and are handed again what it lost.
pub fn told_at_start(
    root: &Root,
    agent: Agent,
    session: &str,
    resumed: bool,
    entries: &[(String, String)],
) -> Result<(), String> {
    let mut told = if resumed { Told::load(root, agent.name(), session) } else { Told::default() };
    for (id, text) in entries {
        told.entries.insert(id.clone(), crate::planning::recall::told_key_of(text));
    }
    told.save(root, agent.name(), session).map_err(|e| e.to_string())
}

/// The session ended: forget what it was told (and any session untouched for a week).
pub fn session_ended(root: &Root, agent: Agent, session: &str) {
    Told::remove(root, agent.name(), session);
}

/// Whether the transcript at `path` is a Codex session's (its lines say so).
pub fn is_codex_transcript(path: &Path) -> bool {
    memfold_store::agents::transcript::is_codex(path)
}

/// How many captured turns wait in the spool for the daemon's extraction.
pub fn waiting(root: &Root) -> usize {
    memfold_store::agents::capture::spooled(root).len()
}

/// What `memfold import --from FROM [PATH]` reads: the agent's own memory (Claude Code's
/// project memory, Codex's memories, `GEMINI.md`, Cursor's rules, Copilot's instructions) where
/// the agent keeps it for the project in `cwd`, or at `path`; a mem0 export at `path`.
pub fn import_source(from: &str, path: Option<PathBuf>, cwd: &Path) -> Result<Found, String> {
    use memfold_store::agents::{claude_memory_dir, codex_home, copilot_home, imports};
    let home = || user_home().map_err(|e| format!("finding the agent's own folder (or give PATH): {e}"));
    Ok(match from {
        "claude-code" | "claude" => imports::claude_code(&match path {
            Some(dir) => dir,
            None => claude_memory_dir(&home()?, &project_folder(cwd)),
        }),
        "codex" => imports::codex(&match path {
            Some(dir) => dir,
            None => codex_home(&home()?).join("memories"),
        }),
        "gemini" => imports::gemini(&match path {
            Some(file) => file,
            None => home()?.join(".gemini/GEMINI.md"),
        }),
        "cursor" => imports::cursor(&path.unwrap_or_else(|| project_folder(cwd))),
        "copilot" => imports::copilot(&path.unwrap_or_else(|| project_folder(cwd)), &copilot_home(&home()?)),
        "mem0" => imports::mem0(&path.ok_or("--from mem0 takes the export's file: memfold import --from mem0 FILE")?),
        other => {
            return Err(format!(
                "--from {other:?}: memfold imports from claude-code, codex, gemini, cursor, copilot or mem0"
            ));
        }
    })
}
