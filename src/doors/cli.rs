//! The command line: one subcommand per verb, each a thin call into the library.
//!
//! Data commands take `--json` and then print exactly one JSON document on stdout; logs
//! go to stderr. Exit codes: 0 success, 1 a check failed (`verify`), 2 an error.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use chrono::NaiveDate;
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use crate::config::{Config, Overrides};
use crate::error::Error;
use crate::memory::views::{Added, NewFact, PassOptions, PassReport, PlanStatus};
use crate::memory::{Memory, SearchRequest};
use crate::service::token;
use crate::store::Root;

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
    /// Config file [default: <root>/memfold.toml]
    #[arg(long, global = true, value_name = "FILE", env = "MEMFOLD_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the folders and files of a memory root.
    Init {
        #[arg(long)]
        json: bool,
    },
    /// Run the daemon: HTTP API, consolidation scheduler and file watcher, until SIGINT/SIGTERM.
    Serve {
        /// Address to listen on [default: server.bind; env: MEMFOLD_SERVER__BIND].
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Serve MCP on stdin/stdout for an agent that starts memfold as a process (until stdin closes).
    Mcp,
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
    /// Re-consolidate the whole archive into a fresh memory.md (the old entries go to history).
    Rebuild {
        #[arg(long)]
        json: bool,
    },
}

/// Review and reversal: runs, undo, plans, apply, reject, history.
#[derive(Debug, Subcommand)]
pub enum ReviewVerb {
    /// List applied consolidation runs: time, ops by kind, facts, LLM cost.
    Runs {
        #[arg(long)]
        json: bool,
    },
    /// Undo a run: the entries it changed go back to their prior versions, what it added is removed.
    Undo {
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// List stored plans (review mode, low-confidence ops) with their ops and diffs.
    Plans {
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
    let overrides = Overrides { root: cli.global.root.clone(), config: cli.global.config.clone() };
    let config = Config::load(&overrides).context("loading configuration")?;
    match cli.command {
        Command::Init { json } => return init(&config, json),
        Command::Token => return token(&config),
        Command::Ui { bind } => return ui(&config, bind),
        _ => {}
    }
    let runtime = runtime()?;
    let code = runtime.block_on(async {
        let memory = Memory::open(config).await?;
        match cli.command {
            Command::Init { .. } | Command::Token | Command::Ui { .. } => unreachable!("handled above"),
            Command::Add(args) => add(&memory, args),
            Command::Status { json } => status(&memory, json).await,
            Command::Verify { json } => verify(&memory, json).await,
            Command::Search(args) => search(&memory, args).await,
            Command::Reindex { clear, json } => reindex(&memory, clear, json).await,
            Command::Curate(verb) => curate(&memory, verb).await,
            Command::Review(verb) => review(&memory, verb).await,
            Command::Serve { bind } => crate::doors::daemon::serve(memory, bind).await.map(|()| 0).map_err(Into::into),
            Command::Mcp => crate::doors::mcp::serve_stdio(memory).await.map(|()| 0).map_err(Into::into),
            Command::Consolidate { force, dry_run, json } => {
                consolidate(&memory, PassOptions { force, dry_run }, json).await
            }
        }
    });
    // An atomic write already handed to a blocking thread finishes before the process exits.
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    code
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn init(config: &Config, json: bool) -> Result<i32> {
    let dir = Memory::init(config).with_context(|| format!("creating memory root {}", config.root.display()))?;
    // The daemon's token, so `memfold token` works before the first `serve`.
    if config.server.auth && config.server.token_env.is_empty() {
        token::ensure(&Root::new(&dir).token_file())?;
    }
    if json {
        print_json(&json!({"root": dir}))?;
    } else {
        println!("memory root ready at {}", dir.display());
    }
    Ok(0)
}

fn ui(config: &Config, bind: Option<String>) -> Result<i32> {
    let code = Memory::mint_sign_in_code(config).context("storing a sign-in code")?;
    let bind = bind.unwrap_or_else(|| config.server.bind.clone());
    let host = match bind.rsplit_once(':') {
        Some(("0.0.0.0" | "[::]" | "", port)) => format!("127.0.0.1:{port}"),
        _ => bind,
    };
    println!("http://{host}/ui/login?code={code}");
    eprintln!("open it within 2 minutes to sign in to the review page of `memfold serve` (it works once)");
    Ok(0)
}

fn token(config: &Config) -> Result<i32> {
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
        for line in std::io::stdin().lock().lines() {
            let line = line.context("reading facts from stdin")?;
            if !line.trim().is_empty() {
                texts.push(line);
            }
        }
    }
    if texts.is_empty() {
        bail!("no facts given (pass them as arguments or with --stdin)");
    }
    let facts: Vec<NewFact> =
        texts.into_iter().map(|text| NewFact { text, date: args.date, source: args.source.clone() }).collect();
    let added = memory.add(facts)?;
    if args.json {
        print_json(&Added::new(&added, None))?;
    } else {
        for fact in &added {
            println!("{} {} {}", fact.id, fact.date, fact.text);
        }
    }
    Ok(0)
}

async fn status(memory: &Memory, json: bool) -> Result<i32> {
    let status = memory.status().await?;
    if json {
        print_json(&status)?;
    } else {
        let gate = &status.gate;
        println!("root:          {}", memory.root().dir().display());
        println!("gate:          {} ({})", if gate.open { "open" } else { "shut" }, gate.reason);
        println!("pending facts: {}", status.pending_facts);
        if status.held_facts > 0 {
            println!(
                "  held:        {} (in a plan, undone or rejected: `consolidate --force` takes them up; \
                 edited in the archive or in an entry memory.md cannot show: see `memfold verify`)",
                status.held_facts
            );
        }
        println!("entries:       {}", status.entries);
        if status.plans_waiting > 0 {
            println!(
                "review:        {} plans wait, {} ops proposed (`memfold plans`, then `apply` or `reject`)",
                status.plans_waiting, status.proposals_waiting
            );
        }
        println!("embedder:      {} ({})", status.embedder.name, status.embedder.why);
        match &status.last_run {
            Some(run) => println!("last run:      {} at {} ({} ops)", run.id, run.finished.to_rfc3339(), run.ops),
            None => println!("last run:      none"),
        }
        if status.problems > 0 {
            println!("problems:      {} (see `memfold verify`)", status.problems);
        }
    }
    Ok(0)
}

async fn verify(memory: &Memory, json: bool) -> Result<i32> {
    let report = memory.verify().await?;
    if json {
        print_json(&report)?;
    } else {
        for problem in &report.problems {
            println!("{problem}");
        }
        for warning in &report.warnings {
            println!("warning: {warning}");
        }
        println!(
            "{}: {} facts ({} pending, {} consolidated, {} tombstoned), {} problems",
            if report.ok { "ok" } else { "NOT OK" },
            report.facts,
            report.pending,
            report.consolidated,
            report.tombstoned,
            report.problems.len()
        );
    }
    Ok(if report.ok { 0 } else { 1 })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

async fn search(memory: &Memory, args: SearchArgs) -> Result<i32> {
    let request = SearchRequest { k: args.k, as_of: args.as_of, history: args.history, skip_recall: false };
    let hits = memory.search(&args.query, &request).await?;
    if args.json {
        print_json(&json!({ "hits": hits }))?;
    } else {
        for hit in &hits {
            println!("{:.3}  {:<8} {:<14} {}", hit.score, hit.kind.as_str(), hit.id, hit.text.replace('\n', " "));
        }
    }
    Ok(0)
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
    if json {
        print_json(&done)?;
    } else {
        let stats = done.stats;
        println!(
            "{} docs: {} embedded, {} written, {} deleted, {} unchanged in {:.2}s",
            done.docs, stats.embedded, stats.upserted, stats.deleted, stats.unchanged, done.seconds
        );
    }
    Ok(0)
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
    if json {
        print_json(&report)?;
    } else if !report.gate.open {
        println!("not consolidating: {}", report.gate.reason);
    } else {
        print_ops(&report);
        println!("{}", report.summary());
        for plan in &report.plans {
            println!(
                "plan {plan} stored for review: `memfold plans`, then `memfold apply {plan}` or `memfold reject {plan}`"
            );
        }
    }
    Ok(0)
}

fn print_ops(report: &PassReport) {
    for op in &report.ops {
        let what = op.content.as_deref().or(op.into.as_deref()).unwrap_or("");
        println!("{:<9} {:<14} {}", op.op, op.target.as_deref().unwrap_or("(new)"), what.replace('\n', " "));
    }
}

async fn curate(memory: &Memory, verb: Curate) -> Result<i32> {
    match verb {
        Curate::Forget { id, reason, json } => {
            let done = memory.forget(&id, reason.as_deref()).await?;
            if json {
                print_json(&done)?;
            } else {
                println!("forgot {} {} (tombstoned: {})", done.kind, done.id, done.tombstoned.join(", "));
            }
        }
        Curate::Pin { id } => {
            memory.pin(&id, true).await?;
            println!("pinned {id}");
        }
        Curate::Unpin { id } => {
            memory.pin(&id, false).await?;
            println!("unpinned {id}");
        }
        Curate::Rebuild { json } => {
            let report = memory.rebuild().await?;
            if json {
                print_json(&report)?;
            } else {
                println!("rebuilt: {} ops from {} decision calls", report.ops.len(), report.clusters.len());
            }
        }
    }
    Ok(0)
}

async fn review(memory: &Memory, verb: ReviewVerb) -> Result<i32> {
    match verb {
        ReviewVerb::Runs { json } => {
            let runs = memory.runs().await?;
            if json {
                print_json(&json!({ "runs": runs }))?;
                return Ok(0);
            }
            if runs.is_empty() {
                println!("no runs yet");
            }
            for run in &runs {
                let ops: Vec<String> = run.ops.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
                let llm = run.llm.map_or(String::new(), |u| {
                    format!(", {} LLM calls ({} + {} tokens)", u.calls, u.prompt_tokens, u.completion_tokens)
                });
                println!(
                    "{}  {}  {}  {} facts{llm}{}{}",
                    run.run,
                    run.time.format("%Y-%m-%d %H:%M:%SZ"),
                    ops.join(", "),
                    run.facts,
                    run.plan.as_ref().map_or(String::new(), |p| format!(", from plan {p}")),
                    run.undone.map_or(String::new(), |t| format!(", undone {}", t.format("%Y-%m-%d %H:%M"))),
                );
            }
        }
        ReviewVerb::Undo { run, json } => {
            let done = memory.undo(&run).await?;
            if json {
                print_json(&done)?;
            } else {
                println!(
                    "undid {}{}: {} entries restored, {} removed, {} facts pending again (a forced pass decides them anew)",
                    done.run,
                    if done.exact { " (memory.md restored byte for byte)" } else { "" },
                    done.restored.len(),
                    done.removed.len(),
                    done.facts.len()
                );
            }
        }
        ReviewVerb::Plans { json } => {
            let plans = memory.plans().await?;
            if json {
                print_json(&json!({ "plans": plans }))?;
                return Ok(0);
            }
            if plans.is_empty() {
                println!("no plans");
            }
            for plan in &plans {
                println!("{}", plan.headline());
                if plan.status == PlanStatus::Rejected {
                    continue;
                }
                for op in &plan.ops {
                    let what = op.content.as_deref().or(op.into.as_deref()).unwrap_or("");
                    let mut notes: Vec<String> = op.why.iter().cloned().collect();
                    notes.extend(op.signals.iter().cloned());
                    notes.extend(op.confidence.map(|c| format!("confidence {c:.2}")));
                    println!(
                        "  {:<9} {:<14} {}{}",
                        op.op,
                        op.target.as_deref().unwrap_or("(new)"),
                        what.replace('\n', " "),
                        if notes.is_empty() { String::new() } else { format!("  [{}]", notes.join("; ")) }
                    );
                }
                print!("{}", plan.diff);
                println!();
            }
        }
        ReviewVerb::Apply { plan, groups, json } => {
            let applied = memory.apply_plan_groups(&plan, groups).await?;
            if json {
                print_json(&applied)?;
            } else {
                println!(
                    "applied plan {} as run {}{}: {} ops, {} facts",
                    applied.plan,
                    applied.run,
                    if applied.rebased { " (rebased onto the changed memory.md)" } else { "" },
                    applied.ops,
                    applied.facts.len()
                );
                if !applied.groups.is_empty() && !applied.rejected.is_empty() {
                    println!(
                        "the other groups were rejected: {} facts stay pending (`consolidate --force` decides them anew)",
                        applied.rejected.len()
                    );
                }
            }
        }
        ReviewVerb::Plan { plan, json } => {
            let detail = memory.plan_detail(&plan).await?;
            if json {
                print_json(&detail)?;
                return Ok(0);
            }
            println!("{}", detail.plan.headline());
            let texts: std::collections::HashMap<&str, &str> =
                detail.fact_texts.iter().map(|f| (f.id.as_str(), f.text.as_str())).collect();
            for group in &detail.groups {
                println!("\ngroup {} ({} ops)", group.group, group.ops.len());
                for fact in &group.facts {
                    println!("  fact {fact}: {}", texts.get(fact.as_str()).copied().unwrap_or("?"));
                }
                for op in &group.ops {
                    let notes: Vec<String> = op
                        .op
                        .why
                        .iter()
                        .cloned()
                        .chain(op.op.confidence.map(|c| format!("confidence {c:.2}")))
                        .collect();
                    println!(
                        "  {} {}{}",
                        op.op.op,
                        op.op.target.as_deref().unwrap_or("(new)"),
                        if notes.is_empty() { String::new() } else { format!("  [{}]", notes.join("; ")) }
                    );
                    for change in &op.changes {
                        let before = change.before.as_deref().unwrap_or("");
                        let after = change.after.as_deref().unwrap_or("");
                        print!("{}", crate::planning::diff::unified(before, after, &change.entry, 1));
                    }
                }
            }
        }
        ReviewVerb::Reject { plan, json } => {
            let rejected = memory.reject_plan(&plan).await?;
            if json {
                print_json(&rejected)?;
            } else {
                println!(
                    "rejected plan {}: {} facts stay pending (left out of automatic passes; `consolidate --force` decides them anew)",
                    rejected.plan,
                    rejected.facts.len()
                );
            }
        }
        ReviewVerb::History { id, json } => {
            let chain = memory.history(&id).await?;
            if json {
                print_json(&chain)?;
                return Ok(0);
            }
            for v in &chain.versions {
                let date = |d: Option<NaiveDate>| d.map_or("?".to_string(), |d| d.to_string());
                let until = if v.status.is_current() { "now".to_string() } else { date(v.valid_until) };
                let mut links = Vec::new();
                if let Some(next) = &v.superseded_by {
                    links.push(format!("superseded by {next}"));
                }
                if !v.supersedes.is_empty() {
                    links.push(format!("supersedes {}", v.supersedes.join(", ")));
                }
                if let Some(run) = &v.run {
                    links.push(format!("run {run}"));
                }
                println!(
                    "{}  {:<9} {} .. {} (updated {}){}",
                    v.id,
                    v.status,
                    date(v.first_seen),
                    until,
                    date(v.updated),
                    if links.is_empty() { String::new() } else { format!("  {}", links.join(", ")) }
                );
                for line in v.content.lines() {
                    println!("    {line}");
                }
            }
        }
    }
    Ok(0)
}

/// Make what this process creates private (umask 077): the `memfold` binary calls it first.
pub fn private_umask() {
    crate::sys::access::private_umask();
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

/// Whether progress bars make sense (stderr is a terminal).
pub fn interactive() -> bool {
    std::io::stderr().is_terminal()
}
