//! The command line: one subcommand per verb, each a thin call into the library.
//!
//! Data commands take `--json` and then print exactly one JSON document on stdout; logs
//! go to stderr. Exit codes: 0 success, 1 a check failed (`verify`), 2 an error.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use chrono::NaiveDate;
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use crate::doors::render::{self, Reader};
use crate::service::Spaces;
use crate::service::token;
use memfold_core::error::Error;
use memfold_core::memory::agents::{self, Agent};
use memfold_core::memory::views::{Added, NewFact, PassOptions};
use memfold_core::memory::{Home, Root};
use memfold_core::memory::{Memory, SearchRequest, SweepOptions, Undo};
use memfold_store::config::{Config, Overrides};

#[derive(Debug, Parser)]
#[command(
    name = "memfold",
    version,
    about = "Long-term memory for AI agents, kept as markdown and consolidated in the background"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The memory root [default: ~/.local/share/memfold; env: MEMFOLD_ROOT]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Config file [default: memfold.toml in the root, or in the home]
    #[arg(long, global = true, value_name = "FILE", env = "MEMFOLD_CONFIG")]
    pub config: Option<PathBuf>,
    /// A home of spaces: `serve` serves every space, `spaces` lists them [env: MEMFOLD_HOME]
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The space of the home a command works on [env: MEMFOLD_SPACE]
    #[arg(long, global = true, value_name = "NAME")]
    pub space: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the folders and files of a memory root (with --home: the home, or with --space
    /// a space of it).
    Init {
        #[arg(long)]
        json: bool,
    },
    /// Run the daemon: HTTP API, consolidation scheduler and file watcher, until SIGINT/SIGTERM
    /// (with --home: for every space of the home).
    Serve {
        /// Address to listen on [default: server.bind; env: MEMFOLD_SERVER__BIND].
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Serve MCP on stdin/stdout for an agent that starts memfold as a process (until stdin
    /// closes). With --home and no --space: the space of the project in the current folder.
    Mcp,
    /// Answer an agent's lifecycle hook (Claude Code, Codex): the hook's JSON on stdin, the
    /// answer on stdout; always exits 0.
    Hook {
        #[arg(value_parser = event_parser())]
        event: crate::doors::hook::Event,
        /// The agent that runs the hook [default: told from the payload].
        #[arg(long, value_parser = parse_agent)]
        agent: Option<Agent>,
    },
    /// What memory holds about a person, pet, place or project: the entries that name it and
    /// those linked to them (with --history, what was true before); without NAME, the names
    /// memory speaks of, most named first.
    About {
        name: Option<String>,
        #[arg(long)]
        history: bool,
        #[arg(long)]
        json: bool,
    },
    /// Add memfold's hooks and MCP server to an agent's settings (claude-code, codex, gemini,
    /// cursor, copilot, opencode), or the MCP server alone to a client's (`setup mcp --client
    /// claude-desktop|vscode|windsurf|zed|cursor`): merged into what is there, backed up first;
    /// --remove takes them out again; --list shows what is set up on this machine.
    Setup {
        /// The agent, or `mcp` (with --client).
        #[arg(required_unless_present = "list")]
        agent: Option<String>,
        /// With `mcp`: the MCP client whose settings get memfold's server.
        #[arg(long, value_parser = crate::doors::setup::client_parser())]
        client: Option<memfold_core::memory::agents::setup::Client>,
        /// Every project of this user (user) or the project in the current folder.
        #[arg(long, value_parser = crate::doors::setup::scope_parser(), default_value = "user")]
        scope: memfold_core::memory::agents::setup::Scope,
        /// Which agents and clients this machine has, which are set up, and with which memfold
        /// (a binary that is no longer there is flagged).
        #[arg(long, conflicts_with_all = ["agent", "remove", "dry_run"])]
        list: bool,
        #[arg(long, requires = "list")]
        json: bool,
        /// Print the change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Take out what setup added.
        #[arg(long)]
        remove: bool,
    },
    /// Run the daemon as this user's service (a systemd user unit, or a launchd agent on
    /// macOS), written with this binary's absolute path and this root or home.
    Service {
        #[command(subcommand)]
        action: crate::doors::unit::ServiceAction,
    },
    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell), e.g.
    /// `memfold completions bash > ~/.local/share/bash-completion/completions/memfold`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a man page for memfold and for each of its commands into DIR
    /// (`memfold.1`, `memfold-search.1`, `memfold-service-install.1`, …).
    Man {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Check that memfold is set up and running: configuration, memory, daemon, token,
    /// privacy, embedder, the agents' hooks, the service; each failure with its fix. Exit 1
    /// when one fails.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Every request sent to an LLM or embedding endpoint: time, host, purpose, bytes, the
    /// secrets masked in it.
    Egress {
        /// From this day on (YYYY-MM-DD).
        #[arg(long)]
        since: Option<NaiveDate>,
        #[arg(long)]
        json: bool,
    },
    /// Bring in what an agent already remembers, as facts: Claude Code's auto memory of the
    /// project in the current folder (or DIR), Codex's memories (or DIR), Gemini CLI's
    /// GEMINI.md memories (or FILE), Cursor's rules or Copilot's instructions of the project in
    /// the current folder (or DIR), a mem0 export FILE.
    Import {
        /// claude-code, codex, gemini, cursor, copilot or mem0.
        #[arg(long = "from")]
        from: String,
        /// The folder or file [default: the agent's own, for claude-code and codex].
        path: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Print the bearer token `memfold serve` requires (made on first use; where it is kept goes to stderr).
    Token,
    /// Print a one-time address that signs a browser in to the review page of `memfold serve`
    /// (good for 2 minutes, once).
    Ui {
        /// The address `memfold serve` listens on [default: server.bind].
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Append facts to today's archive (or --date's).
    Add(AddArgs),
    /// List the spaces of a home: entries, pending facts, last pass, disk, last use.
    Spaces {
        /// Join the second space into the first: every fact, entry, tombstone and hand-written
        /// line of it (as a sync joins two machines); its folder is then kept aside under the
        /// home's `.memfold/merged/`. For spaces made per work tree or clone of one repository.
        #[arg(long, num_args = 2, value_names = ["INTO", "FROM"])]
        merge: Option<Vec<String>>,
        #[arg(long)]
        json: bool,
    },
    /// Compare the current entries with each other (those new or changed since the last sweep,
    /// or all with --full) and store the duplicates and contradictions found as a plan for
    /// review; and propose retiring entries unused for `decay.retire_after_days`, as a plan of
    /// its own.
    Sweep {
        #[arg(long)]
        full: bool,
        /// Find and report; store nothing.
        #[arg(long)]
        dry_run: bool,
        /// Only the entries unused for `decay.retire_after_days` (each with its last use).
        #[arg(long)]
        stale: bool,
        #[arg(long)]
        json: bool,
    },
    /// Sync with a git remote: commit what changed here, fetch, merge memfold's files, push.
    Sync {
        /// Make the root a repository (if it is not one) that syncs with REMOTE (a path, an
        /// ssh or https address); a root that already holds memory joins the remote's.
        #[arg(long, value_name = "REMOTE")]
        init: Option<String>,
        /// Show ahead/behind, the last sync and its error; change nothing.
        #[arg(long)]
        status: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show the gate, pending facts, entries and the last run.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Check that every archived fact is accounted for (and the index matches the files); exit 1 if not.
    Verify {
        #[arg(long)]
        json: bool,
    },
    /// Search entries and pending facts (hybrid: vectors + full text).
    Search(SearchArgs),
    /// Bring the index up to date with the files, or rebuild it from scratch with --clear.
    Reindex {
        #[arg(long)]
        clear: bool,
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Curate(Curate),
    #[command(flatten)]
    Review(ReviewVerb),
    /// Run a consolidation pass if the gate is open (or --force).
    Consolidate {
        /// Skip min_hours and min_facts (never the lock).
        #[arg(long)]
        force: bool,
        /// Print the clusters and the ops it would apply; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
}

/// Curation: forget, pin, unpin, rebuild.
#[derive(Debug, Subcommand)]
pub enum Curate {
    /// Forget an entry or a pending fact: it moves to history and never comes back.
    Forget {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Pin an entry: consolidation never replaces or removes it.
    Pin { id: String },
    /// Unpin an entry.
    Unpin { id: String },
    /// Copy an entry into a shared space of the home, as a new fact whose source names this
    /// space and the entry.
    Share {
        id: String,
        /// The shared space ([spaces] shared).
        #[arg(long)]
        to: String,
        #[arg(long)]
        json: bool,
    },
    /// Re-consolidate the whole archive into a fresh memory.md (the old entries go to history).
    Rebuild {
        #[arg(long)]
        json: bool,
    },
    /// Merge entries into the first one named: sources united, the others to history as merged
    /// into it. One run: `memfold undo RUN` takes it back.
    Merge {
        #[arg(required = true, num_args = 2..)]
        ids: Vec<String>,
        /// The merged text [default: the LLM's when it keeps every detail, else the texts joined].
        #[arg(long)]
        text: Option<String>,
        /// Why, kept with the run.
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Supersede an entry by another entry (`--with NEW`) or by a new text (`--text T`): the old
    /// version goes to history, superseded.
    Supersede {
        old: String,
        #[arg(long, conflicts_with = "text", required_unless_present = "text")]
        with: Option<String>,
        #[arg(long)]
        text: Option<String>,
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

/// Review and reversal: runs, undo, plans, apply, reject, history.
#[derive(Debug, Subcommand)]
pub enum ReviewVerb {
    /// List applied consolidation runs, newest first: time, ops by kind, facts, LLM cost.
    Runs {
        /// Oldest first.
        #[arg(long)]
        reverse: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show an applied run: its ops in groups, numbered as `undo --op` and `--group` name them.
    Run {
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Undo a run (or only some of its ops): the entries it changed go back to their prior
    /// versions, what it added is removed.
    Undo {
        run: String,
        /// Undo only these ops (1-based, as `memfold run RUN` numbers them, e.g. 2,5).
        #[arg(long, value_delimiter = ',')]
        op: Vec<usize>,
        /// Undo only these op groups.
        #[arg(long, value_delimiter = ',')]
        group: Vec<usize>,
        /// Why, kept with the run.
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List stored plans (review mode, low-confidence ops, sweeps), newest first, with their
    /// ops and diffs.
    Plans {
        /// Also the applied, rejected and expired ones.
        #[arg(long)]
        all: bool,
        /// Oldest first.
        #[arg(long)]
        reverse: bool,
        #[arg(long)]
        json: bool,
    },
    /// Apply a stored plan, or only some of its op groups (the rest is rejected).
    Apply {
        plan: String,
        /// Apply only these op groups (as `memfold plan <id>` numbers them, e.g. 1,3); the
        /// rest of the plan is rejected.
        #[arg(long, value_delimiter = ',')]
        groups: Option<Vec<usize>>,
        /// Why, kept with the run.
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show a stored plan: its ops in groups, each entry before and after, the facts.
    Plan {
        plan: String,
        #[arg(long)]
        json: bool,
    },
    /// Reject a stored plan: nothing is written; its facts stay pending for a forced pass.
    Reject {
        plan: String,
        /// Why, kept with the plan.
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show an entry's chain of versions (supersedes / superseded_by) with dates.
    History {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    pub query: String,
    /// Number of hits [default: search.default_k].
    #[arg(short)]
    pub k: Option<usize>,
    /// What was current on this day (YYYY-MM-DD).
    #[arg(long)]
    pub as_of: Option<NaiveDate>,
    /// Include superseded versions.
    #[arg(long)]
    pub history: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Facts, one per argument.
    pub facts: Vec<String>,
    /// Read facts from stdin, one per line.
    #[arg(long)]
    pub stdin: bool,
    /// The day the facts belong to (YYYY-MM-DD) [default: today].
    #[arg(long)]
    pub date: Option<NaiveDate>,
    /// Where the facts came from (stored as `src`).
    #[arg(long)]
    pub source: Option<String>,
    #[arg(long)]
    pub json: bool,
}

/// Run a parsed command; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32> {
    let overrides = Overrides {
        root: cli.global.root.clone(),
        config: cli.global.config.clone(),
        home: cli.global.home.clone(),
        space: cli.global.space.clone(),
    };
    if let Some(code) = generate(&cli.command)? {
        return Ok(code);
    }
    if let Command::Hook { event, agent } = cli.command {
        return Ok(crate::doors::hook::run(&overrides, event, agent));
    }
    if let Command::Doctor { json } = cli.command {
        return Ok(crate::doors::doctor::run(&overrides, json));
    }
    let mut config = Config::load(&overrides).context("loading configuration")?;
    if let Command::Service { action } = cli.command {
        return crate::doors::unit::command(&config, overrides.config.as_deref(), action).map_err(anyhow::Error::msg);
    }
    if let Command::Setup { agent, client, scope, list, json, dry_run, remove } = cli.command {
        use memfold_core::memory::agents::setup::{Request, Target};
        if list {
            return crate::doors::setup::list(json).map_err(anyhow::Error::msg);
        }
        let target = match (agent.as_deref().unwrap_or_default(), client) {
            ("mcp", Some(client)) => Target::Mcp(client),
            ("mcp", None) => bail!("setup mcp takes --client: claude-desktop, vscode, windsurf, zed or cursor"),
            (_, Some(_)) => bail!("--client goes with `setup mcp`; `setup AGENT` sets up the agent's hooks and server"),
            (name, None) => Target::Agent(Agent::parse(name).map_err(anyhow::Error::msg)?),
        };
        let config_file = overrides.config.clone();
        let request = Request { target, scope, dry_run, remove, config_file };
        return crate::doors::setup::run(&config, &request).map_err(anyhow::Error::msg);
    }
    // An agent starts `memfold --home H mcp` in its project: the project's space.
    if let (Command::Mcp, Some(home), None) = (&cli.command, &config.home, &config.space) {
        let cwd = std::env::current_dir().context("the current folder")?;
        let project = memfold_core::memory::project::Project::of(&cwd);
        let found = memfold_core::memory::project::project_space(&config, &Home::new(home), &project)
            .map_err(anyhow::Error::msg)?;
        found.notes.iter().for_each(|note| eprintln!("memfold: {note}"));
        let space = found.name;
        config =
            Config::load(&Overrides { space: Some(space), ..overrides.clone() }).context("loading configuration")?;
    }
    let home_level = config.home.is_some() && config.space.is_none();
    if let (Command::Egress { since, json }, false) = (&cli.command, home_level) {
        let root = Root::new(&config.root);
        root.check_initialized().map_err(anyhow::Error::msg)?;
        let sent = memfold_core::memory::views::sent_since(&root, *since).map_err(anyhow::Error::msg)?;
        return print(*json, &json!({ "requests": sent }), || render::egress(&sent));
    }
    match cli.command {
        Command::Init { json } => return init(&config, json),
        Command::Token => return token(&config),
        Command::Ui { bind } => return ui(&config, bind),
        Command::Serve { .. } | Command::Spaces { .. } if home_level => {}
        Command::Spaces { .. } => {
            bail!("`memfold spaces` lists the spaces of a home: give --home DIR (or MEMFOLD_HOME)")
        }
        _ if home_level => bail!(
            "this command works on one space of the home: give --space NAME (or MEMFOLD_SPACE); `memfold spaces` lists them"
        ),
        _ => {}
    }
    if let (Some(home), Some(space)) = (&config.home, &config.space)
        && !Root::new(&config.root).is_initialized()
    {
        bail!("no space {space} in the home {}: `memfold --home … --space {space} init` makes it", home.display());
    }
    let runtime = runtime()?;
    let code = runtime.block_on(async {
        if home_level {
            return match cli.command {
                Command::Serve { bind } => {
                    crate::doors::daemon::serve_home(config, bind).await.map(|()| 0).map_err(Into::into)
                }
                Command::Spaces { merge: Some(names), json } => join_spaces(config, &names, json).await,
                Command::Spaces { merge: None, json } => spaces(config, json).await,
                _ => unreachable!("only these work on a whole home"),
            };
        }
        let memory = Memory::open(config).await?;
        on_root(memory, cli.command).await
    });
    // An atomic write already handed to a blocking thread finishes before the process exits.
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    code
}

/// The commands that only print what clap knows: completions and man pages.
fn generate(command: &Command) -> Result<Option<i32>> {
    match command {
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(*shell, &mut Cli::command(), "memfold", &mut std::io::stdout());
            return Ok(Some(0));
        }
        Command::Man { dir } => {
            use clap::CommandFactory;
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(Cli::command(), dir).with_context(|| format!("writing into {}", dir.display()))?;
            let pages = std::fs::read_dir(dir)?
                .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "1")))
                .count();
            println!("{pages} man pages in {} (MANPATH, or copy them into ~/.local/share/man/man1)", dir.display());
            return Ok(Some(0));
        }
        _ => {}
    }
    Ok(None)
}

/// A command on one space or root, with its memory open.
async fn on_root(memory: Memory, command: Command) -> Result<i32> {
    match command {
        Command::Init { .. }
        | Command::Token
        | Command::Ui { .. }
        | Command::Spaces { .. }
        | Command::Hook { .. }
        | Command::Egress { .. }
        | Command::Service { .. }
        | Command::Doctor { .. }
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::Setup { .. } => {
            unreachable!("handled above")
        }
        Command::Import { from, path, json } => import(&memory, &from, path, json).await,
        Command::About { name, history, json } => {
            let answer = memory.about(name.as_deref(), history).await?;
            print(json, &answer, || render::about(&answer))
        }
        Command::Add(args) => add(&memory, args),
        Command::Status { json } => status(&memory, json).await,
        Command::Sync { init, status: true, json } => {
            if init.is_some() {
                bail!("--status changes nothing: give it without --init");
            }
            let status = memory.sync_status().await?;
            print(json, &status, || render::sync_status(&status))
        }
        Command::Sync { init, json, .. } => {
            let report = memory.sync(init).await?;
            print(json, &report, || render::synced(&report))
        }
        Command::Sweep { full, dry_run, stale, json } => {
            let report = memory.sweep(SweepOptions { full, dry_run, stale }).await?;
            print(json, &report, || render::sweep(&report))
        }
        Command::Verify { json } => verify(&memory, json).await,
        Command::Search(args) => search(&memory, args).await,
        Command::Reindex { clear, json } => reindex(&memory, clear, json).await,
        Command::Curate(verb) => curate(&memory, verb).await,
        Command::Review(verb) => review(&memory, verb).await,
        Command::Serve { bind } => crate::doors::daemon::serve_root(memory, bind).await.map(|()| 0).map_err(Into::into),
        Command::Mcp => crate::doors::mcp::serve_stdio(memory).await.map(|()| 0).map_err(Into::into),
        Command::Consolidate { force, dry_run, json } => {
            consolidate(&memory, PassOptions { force, dry_run }, json).await
        }
    }
}

/// The hook events by memfold's names (listed for completions and `--help`).
fn event_parser() -> impl clap::builder::TypedValueParser<Value = crate::doors::hook::Event> {
    use clap::builder::TypedValueParser;
    let names = agents::HookEvent::ALL.map(|e| e.name());
    clap::builder::PossibleValuesParser::new(names)
        .map(|name| agents::HookEvent::parse(&name).expect("one of the names listed"))
}

fn parse_agent(name: &str) -> Result<Agent, String> {
    Agent::parse(name)
}

/// `import --from claude-code|codex|gemini|cursor|copilot|mem0 [PATH]`.
async fn import(memory: &Memory, from: &str, path: Option<PathBuf>, json: bool) -> Result<i32> {
    let cwd = std::env::current_dir().context("the current folder")?;
    let found = agents::import_source(from, path, &cwd).map_err(anyhow::Error::msg)?;
    for problem in &found.problems {
        eprintln!("skipped: {problem}");
    }
    let imported = memory.import(found.facts).await?;
    print(json, &imported, || {
        format!(
            "{} facts imported, {} already in memory{}",
            imported.added,
            imported.present,
            if found.problems.is_empty() {
                String::new()
            } else {
                format!(", {} parts skipped (above)", found.problems.len())
            }
        )
    })
}

/// The command line's reader: a person at a shell.
const READER: Reader = Reader::Person;

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Print `value` as JSON, or its text.
fn print(json: bool, value: &impl serde::Serialize, text: impl FnOnce() -> String) -> Result<i32> {
    if json {
        print_json(value)?;
    } else {
        println!("{}", text());
    }
    Ok(0)
}

fn init(config: &Config, json: bool) -> Result<i32> {
    if let Some(home) = &config.home {
        let home = Home::new(home);
        home.check_not_a_root().map_err(anyhow::Error::msg)?;
        home.init().with_context(|| format!("creating home {}", home.dir().display()))?;
        // The operator's token, so `memfold --home … token` works before the first `serve`.
        if config.server.token_env.is_empty() {
            token::ensure(&home.token_file())?;
        }
        if config.space.is_none() {
            if json {
                print_json(&json!({"home": home.dir()}))?;
            } else {
                println!("home ready at {} (`--space NAME init` makes a space)", home.dir().display());
            }
            return Ok(0);
        }
    }
    let dir = Memory::init(config).with_context(|| format!("creating memory root {}", config.root.display()))?;
    // The daemon's token, so `memfold token` works before the first `serve`; every space of a
    // home has one (its token decides the space).
    if (config.server.auth && config.server.token_env.is_empty()) || config.space.is_some() {
        token::ensure(&Root::new(&dir).token_file())?;
    }
    if json {
        print_json(&json!({"root": dir, "space": config.space}))?;
    } else if let Some(space) = &config.space {
        println!("space {space} ready at {}", dir.display());
    } else {
        println!("memory root ready at {}", dir.display());
    }
    Ok(0)
}

/// The spaces of a home, with their counts.
async fn spaces(config: Config, json: bool) -> Result<i32> {
    let (spaces, _) = Spaces::home(config)?;
    let list = spaces.summaries().await;
    print(json, &json!({ "spaces": list }), || render::spaces(&list))
}

/// `spaces --merge INTO FROM`.
async fn join_spaces(config: Config, names: &[String], json: bool) -> Result<i32> {
    let [into, from] = names else { bail!("--merge takes two spaces: INTO FROM") };
    let home = Home::new(config.home.clone().context("--merge joins spaces of a home: give --home DIR")?);
    let other = home.space(from).map_err(anyhow::Error::msg)?;
    other.check_initialized().map_err(|e| anyhow::anyhow!("space {from}: {e}"))?;
    home.space(into)
        .map_err(anyhow::Error::msg)?
        .check_initialized()
        .map_err(|e| anyhow::anyhow!("space {into}: {e}"))?;
    let flags = Overrides { home: Some(home.dir().to_path_buf()), space: Some(into.clone()), ..Overrides::default() };
    let memory = Memory::open(Config::load(&flags).context("loading configuration")?).await?;
    let stamp = memfold_store::sys::clock::now().format("%Y%m%dT%H%M%SZ");
    let aside = home.merged_dir(from, &stamp.to_string());
    let joined = memory.join_space(other, from.clone(), aside).await?;
    print(json, &joined, || render::joined(into, &joined))
}

fn ui(config: &Config, bind: Option<String>) -> Result<i32> {
    let code = Memory::mint_sign_in_code(config).context("storing a sign-in code")?;
    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let host = match bind.rsplit_once(':') {
        Some(("0.0.0.0" | "[::]" | "", port)) => format!("127.0.0.1:{port}"),
        _ => bind,
    };
    match &config.space {
        Some(space) => println!("http://{host}/ui/login?code={code}&space={space}"),
        None => println!("http://{host}/ui/login?code={code}"),
    }
    eprintln!("open it within 2 minutes to sign in to the review page of `memfold serve` (it works once)");
    Ok(0)
}

fn token(config: &Config) -> Result<i32> {
    if let (Some(home), None) = (&config.home, &config.space) {
        let token = match config.server_token_env() {
            Some(token) => token,
            None => token::ensure(&Home::new(home).token_file())?,
        };
        println!("{token}");
        eprintln!("the home's token: it reaches every space of `memfold serve --home`, at /spaces/<name>/…");
        return Ok(0);
    }
    if config.space.is_some() {
        let root = Root::new(&config.root);
        root.check_initialized().map_err(anyhow::Error::msg)?;
        println!("{}", token::ensure(&root.token_file())?);
        eprintln!("the space's token: it reaches this space, and nothing else, on `memfold serve --home`");
        return Ok(0);
    }
    let root = Root::new(&config.root);
    root.check_initialized().map_err(anyhow::Error::msg)?;
    match token::resolve(config, &root, None)? {
        token::Auth::Token { token, source } => {
            println!("{token}");
            match source {
                token::Source::File(path) => eprintln!(
                    "the bearer token of `memfold serve` on this root, kept in {} (delete the file and restart \
                     memfold serve for a new one)",
                    path.display()
                ),
                token::Source::Env(var) => {
                    eprintln!("the bearer token of `memfold serve`, taken from ${var} (server.token_env)")
                }
            }
            Ok(0)
        }
        token::Auth::Off => Err(token::TokenError::Off.into()),
    }
}

fn add(memory: &Memory, args: AddArgs) -> Result<i32> {
    let mut texts = args.facts;
    if args.stdin {
        let mut input = String::new();
        std::io::stdin().read_to_string(&mut input).context("reading facts from stdin")?;
        // The whole input through the secret gate before it is cut into lines: a block that
        // spans lines (a pasted private key) is caught whole, not line by line.
        let input = memory.gate("input on stdin", Some(&input))?.unwrap_or_default();
        texts.extend(input.lines().filter(|l| !l.trim().is_empty()).map(str::to_string));
    }
    if texts.is_empty() {
        bail!("no facts given (pass them as arguments or with --stdin)");
    }
    let facts: Vec<NewFact> =
        texts.into_iter().map(|text| NewFact { text, date: args.date, source: args.source.clone() }).collect();
    let added = Added::new(&memory.add(memory.check_facts(facts)?)?, None);
    print(args.json, &added, || render::stored(&added))
}

async fn status(memory: &Memory, json: bool) -> Result<i32> {
    let status = memory.status().await?;
    let daemon = match memory.daemon() {
        Some(d) => format!("listening on {} (pid {})", d.addr, d.pid),
        None => "not running".to_string(),
    };
    print(json, &status, || {
        format!("root: {}\ndaemon: {daemon}\n{}", memory.root().dir().display(), render::status(&status, READER))
    })
}

async fn verify(memory: &Memory, json: bool) -> Result<i32> {
    let report = memory.verify().await?;
    print(json, &report, || render::verified(&report))?;
    Ok(if report.ok { 0 } else { 1 })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

async fn search(memory: &Memory, args: SearchArgs) -> Result<i32> {
    let request = SearchRequest {
        k: args.k,
        as_of: args.as_of,
        history: args.history,
        skip_recall: false,
        min_similarity: None,
        dated: None,
    };
    let hits = memory.search(&args.query, &request).await?;
    print(args.json, &json!({ "hits": hits }), || render::hits(&hits))
}

async fn reindex(memory: &Memory, clear: bool, json: bool) -> Result<i32> {
    let bar = interactive().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} docs ({per_sec}, {eta} left)")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let progress = |done: usize, total: usize| {
        if let Some(bar) = &bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    };
    let done = memory.reindex(clear, Some(&progress)).await?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    print(json, &done, || render::reindexed(&done))
}

async fn consolidate(memory: &Memory, opts: PassOptions, json: bool) -> Result<i32> {
    let report = match memory.consolidate(opts).await {
        Ok(report) => report,
        Err(err @ Error::Busy(_)) => {
            eprintln!("{err}");
            return Ok(0);
        }
        Err(err) => return Err(err.into()),
    };
    print(json, &report, || render::pass(&report, READER))
}

async fn curate(memory: &Memory, verb: Curate) -> Result<i32> {
    match verb {
        Curate::Forget { id, reason, json } => {
            let done = memory.forget(&id, reason.as_deref()).await?;
            print(json, &done, || render::forgotten(&done))
        }
        Curate::Pin { id } => {
            memory.pin(&id, true).await?;
            print(false, &(), || render::pinned(&id, true))
        }
        Curate::Unpin { id } => {
            memory.pin(&id, false).await?;
            print(false, &(), || render::pinned(&id, false))
        }
        Curate::Share { id, to, json } => {
            let shared = share(memory, &id, &to).await?;
            print(json, &shared, || render::stored(&shared))
        }
        Curate::Rebuild { json } => {
            let report = memory.rebuild().await?;
            print(json, &report, || render::pass(&report, READER))
        }
        Curate::Merge { ids, text, note, json } => {
            let done = memory.merge(&ids, text.as_deref(), note.as_deref()).await?;
            print(json, &done, || render::curated(&done, READER))
        }
        Curate::Supersede { old, with, text, note, json } => {
            let by = memfold_core::memory::requests::successor(with, text)?;
            let done = memory.supersede(&old, by, note.as_deref()).await?;
            print(json, &done, || render::curated(&done, READER))
        }
    }
}

async fn review(memory: &Memory, verb: ReviewVerb) -> Result<i32> {
    match verb {
        ReviewVerb::Runs { reverse, json } => {
            // Newest first, as `git log` lists commits.
            let mut runs = memory.runs().await?;
            if !reverse {
                runs.reverse();
            }
            print(json, &json!({ "runs": runs }), || render::runs(&runs))
        }
        ReviewVerb::Run { run, json } => {
            let detail = memory.run_detail(&run).await?;
            print(json, &detail, || render::run_detail(&detail))
        }
        ReviewVerb::Undo { run, op, group, note, json } => {
            let done = memory.undo_part(&run, &Undo { ops: op, groups: group, note }).await?;
            print(json, &done, || render::undone(&done, READER))
        }
        ReviewVerb::Plans { all, reverse, json } => {
            let mut plans = if all { memory.all_plans().await? } else { memory.plans().await? };
            if !reverse {
                plans.reverse();
            }
            print(json, &json!({ "plans": plans }), || render::plans(&plans))
        }
        ReviewVerb::Apply { plan, groups, note, json } => {
            let applied = memory.apply_plan_groups(&plan, groups, note.as_deref()).await?;
            print(json, &applied, || render::applied(&applied, READER))
        }
        ReviewVerb::Plan { plan, json } => {
            let detail = memory.plan_detail(&plan).await?;
            print(json, &detail, || render::plan_detail(&detail))
        }
        ReviewVerb::Reject { plan, note, json } => {
            let rejected = memory.reject_plan(&plan, note.as_deref()).await?;
            print(json, &rejected, || render::rejected(&rejected, READER))
        }
        ReviewVerb::History { id, json } => {
            let chain = memory.history(&id).await?;
            print(json, &chain, || render::chain(&chain))
        }
    }
}

/// Copy entry `id` of `memory`'s space into the shared space `to` of its home, as
/// `Service::share` does for the daemon's doors.
async fn share(memory: &Memory, id: &str, to: &str) -> Result<Added> {
    let config = memory.config();
    let from = config.space.clone().unwrap_or_default();
    crate::service::spaces::check_share(config.home.is_some().then_some(config), &from, to)?;
    let fact = memory.shared_fact(&from, id).await?;
    let home = config.home.clone();
    let target = Config::load(&Overrides { home, space: Some(to.to_string()), ..Overrides::default() })?;
    if !Root::new(&target.root).is_initialized() {
        bail!("the shared space {to} has not been made yet: `memfold --home … --space {to} init`");
    }
    let target = Memory::open(target).await?;
    Ok(Added::new(&target.add(target.check_facts(vec![fact])?)?, None))
}

/// Make what this process creates private (umask 077): the `memfold` binary calls it first.
pub fn private_umask() {
    memfold_store::sys::access::private_umask();
}

/// Process-wide settings for a long-running memfold, made before any other thread starts (the
/// `memfold` binary calls it first, from `main`):
/// - lance's vector index statistics carry every IVF centroid unless told not to (the default
///   its next release takes); memfold reads only row and segment counts from them, after every
///   index write, so they are left out (`LANCE_INCLUDE_VECTOR_CENTROIDS=false`, unless set);
/// - glibc's allocator keeps up to eight arenas per core, each holding on to memory freed in
///   it; a daemon whose tokio threads take turns allocating index pages then grows without
///   holding more. Two arenas keep it near what it holds (`MALLOC_ARENA_MAX` still wins).
pub fn process_settings() {
    if std::env::var_os("LANCE_INCLUDE_VECTOR_CENTROIDS").is_none() {
        // SAFETY: called from `main` before any other thread exists, so nothing reads the
        // environment while it changes.
        unsafe { std::env::set_var("LANCE_INCLUDE_VECTOR_CENTROIDS", "false") };
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; no allocation is in flight on
        // another thread, since there is none.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    }
}

/// A command that prints its answer and ends dies quietly when whoever reads its output stops
/// (`memfold search q | head -1`), as git and ripgrep do, instead of panicking on the closed
/// pipe: the default action of SIGPIPE, which Rust's runtime sets aside. The daemon, the
/// stdio MCP server and the hooks keep ignoring it: a client or an agent that goes away must
/// not end them.
pub fn quiet_on_closed_pipe(command: &Command) {
    if matches!(command, Command::Serve { .. } | Command::Mcp | Command::Hook { .. }) {
        return;
    }
    // SAFETY: called from `main` before any other thread exists; only the disposition of one
    // signal changes.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether progress bars make sense (stderr is a terminal).
pub fn interactive() -> bool {
    std::io::stderr().is_terminal()
}
