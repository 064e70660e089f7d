//! `memfold setup AGENT`, `memfold setup mcp --client CLIENT` and `memfold setup --list`: the
//! person's flags parsed, the plan made by [`memfold_core::memory::agents::setup`], each change
//! printed (as a diff with `--dry-run`) and, unless it is a dry run, made.

use memfold_core::memory::agents::Agent;
use memfold_core::memory::agents::setup::{self, Client, Edit, Request, Scope, Target};
use memfold_core::memory::text;
use memfold_store::config::Config;

/// `--scope` by its names.
pub fn scope_parser() -> impl clap::builder::TypedValueParser<Value = Scope> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("user")
            .help("Every project of this user (~/.claude/settings.json, ~/.gemini/settings.json, …)"),
        PossibleValue::new("project").help(
            "This project only (Claude Code: .claude/settings.local.json; the others: the project's settings folder, \
             whose files then name this machine's memfold: keep them out of commits)",
        ),
    ])
    .map(|name| if name == "project" { Scope::Project } else { Scope::User })
}

/// `--client` by its names.
pub fn client_parser() -> impl clap::builder::TypedValueParser<Value = Client> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(Client::ALL.map(Client::name))
        .map(|name| Client::ALL.into_iter().find(|c| c.name() == name).expect("one of the names listed"))
}

/// Run `setup`: print what changes (and, unless `dry_run`, make it).
pub fn run(config: &Config, request: &Request) -> Result<i32, String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let (edits, switched) = setup::plan(config, request, &cwd)?;
    for edit in &edits {
        let path = edit.path.display().to_string();
        if !edit.changes() {
            println!("{path}: unchanged");
            continue;
        }
        if request.dry_run {
            let before = edit.before.as_deref().unwrap_or_default();
            let after = edit.after.as_deref().unwrap_or_default();
            print!("{}", text::unified(before, after, &path, 3));
            continue;
        }
        match setup::apply(edit)? {
            Some(backup) => println!("{path}: changed (the old file is kept as {})", backup.display()),
            None if edit.after.is_none() => println!("{path}: removed (memfold's part was all it held)"),
            None => println!("{path}: created"),
        }
    }
    for switch in &switched {
        println!(
            "{switch} = true: {} runs hooks only with it on",
            match request.target {
                Target::Agent(agent) => agent.title(),
                Target::Mcp(_) => "the client",
            }
        );
    }
    if request.dry_run || request.remove || !edits.iter().any(Edit::changes) {
        return Ok(0);
    }
    let next = match request.target {
        Target::Agent(Agent::ClaudeCode) => {
            "Claude Code now recalls memory at session start and for each prompt, and captures each session \
             (its own auto memory is left as it is). Check with /hooks and /mcp in Claude Code."
        }
        Target::Agent(Agent::Codex) => {
            "Codex asks you to trust new hooks once: open /hooks in Codex and trust memfold's. Its own memories \
             are left as they are."
        }
        Target::Agent(Agent::Gemini) => {
            "Gemini CLI now recalls memory at session start and before each prompt, and captures each turn. \
             Check with /hooks and /mcp in Gemini CLI; project hooks run once the folder is trusted."
        }
        Target::Agent(Agent::Cursor) => {
            "Cursor reloads hooks.json by itself: its Hooks settings tab lists memfold's. Rules and memories of \
             its own are left as they are."
        }
        Target::Agent(Agent::Copilot) => {
            "Copilot CLI runs memfold's hooks from the next session (repository hooks once the folder is \
             trusted); /mcp lists the server."
        }
        Target::Agent(Agent::OpenCode) => {
            "OpenCode loads memfold's plugin at its next start: recall at session start and for each prompt, \
             capture when a session goes idle."
        }
        Target::Mcp(_) => "Restart the client: it starts `memfold mcp` and lists memory_search among its tools.",
    };
    println!("{next}");
    if request.scope == Scope::Project && !matches!(request.target, Target::Agent(Agent::ClaudeCode)) {
        println!("These project files name this machine's memfold and memory: keep them out of commits.");
    }
    Ok(0)
}

/// `memfold setup --list`: every agent and client, whether it is on this machine, and where
/// memfold is set up in its files (flagging a binary that is no longer there).
pub fn list(json: bool) -> Result<i32, String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let listed = setup::listing(&cwd)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "agents": listed })).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    for item in &listed {
        let found = match &item.found {
            Some(at) => format!("found ({at})"),
            None => "not found".into(),
        };
        let setup = match (&item.problem, item.setup.is_empty()) {
            (Some(problem), _) => problem.clone(),
            (None, true) => format!("not set up (`memfold setup {}`)", item.name),
            (None, false) => item
                .setup
                .iter()
                .map(|i| {
                    let gone = if i.binary_exists {
                        String::new()
                    } else {
                        format!(" — NOT THERE: run `memfold setup {}` from the memfold to use", item.name)
                    };
                    format!("{} in {}: {} {}{gone}", i.kind, i.file.display(), i.binary.display(), i.memory)
                })
                .collect::<Vec<_>>()
                .join("\n    "),
        };
        println!("{} ({}): {found}\n    {setup}", item.name, item.title);
    }
    Ok(0)
}
