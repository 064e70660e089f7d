//! Configuration: every key with its default, read as defaults < file < environment < flags.
//!
//! The file is `<root>/memfold.toml` or the path given with `--config`. Environment
//! variables `MEMFOLD_SECTION__KEY` (e.g. `MEMFOLD_LLM__BASE_URL`) override single keys and
//! `MEMFOLD_ROOT` overrides `root`. Unknown keys, in the file or the environment, are an
//! error that names the key.
//!
//! **Homes.** With `--home DIR` (`MEMFOLD_HOME`) the file is `<home>/memfold.toml`, shared by
//! every space, and `--space NAME` (`MEMFOLD_SPACE`) picks the space whose root is
//! `<home>/spaces/<name>`; a `memfold.toml` in that root overrides the home's keys for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a credential in an arriving fact becomes (the secret detector's policy).
pub use crate::secrets::SecretsPolicy;
use crate::sys::clock::{Clock, Zone};

/// Errors while loading configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("reading config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config {origin}: {message}")]
    Invalid { origin: String, message: String },
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The memory root (also `--root` / `MEMFOLD_ROOT`); with a home and a space, the space's.
    pub root: PathBuf,
    /// The home of spaces (`--home` / `MEMFOLD_HOME`), when memfold runs on one.
    #[serde(skip)]
    pub home: Option<PathBuf>,
    /// The space of the home this configuration is for (`--space` / `MEMFOLD_SPACE`); none for
    /// what works on the home as a whole (serve, spaces, the home's token).
    #[serde(skip)]
    pub space: Option<String>,
    pub ingest: IngestConfig,
    pub llm: LlmConfig,
    pub embedding: EmbeddingConfig,
    pub consolidation: ConsolidationConfig,
    pub review: ReviewConfig,
    pub promotion: PromotionConfig,
    pub recall: RecallConfig,
    pub decay: DecayConfig,
    pub search: SearchConfig,
    pub server: ServerConfig,
    pub security: SecurityConfig,
    pub time: TimeConfig,
    pub spaces: SpacesConfig,
    pub hooks: HooksConfig,
    pub sync: SyncConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("~/.local/share/memfold"),
            home: None,
            space: None,
            ingest: IngestConfig::default(),
            llm: LlmConfig::default(),
            embedding: EmbeddingConfig::default(),
            consolidation: ConsolidationConfig::default(),
            review: ReviewConfig::default(),
            promotion: PromotionConfig::default(),
            recall: RecallConfig::default(),
            decay: DecayConfig::default(),
            search: SearchConfig::default(),
            server: ServerConfig::default(),
            security: SecurityConfig::default(),
            time: TimeConfig::default(),
            spaces: SpacesConfig::default(),
            hooks: HooksConfig::default(),
            sync: SyncConfig::default(),
        }
    }
}

/// What a fact may be when it arrives (`memfold add`, `POST /facts`, `POST /turns`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// Longest fact text (and source) accepted, in bytes as stored (whitespace runs collapsed).
    pub max_fact_bytes: usize,
    /// What a credential in a fact becomes (docs/security.md, "Secrets").
    pub secrets: SecretsPolicy,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig { max_fact_bytes: 8192, secrets: SecretsPolicy::Redact }
    }
}

/// The chat model used to decide clusters, extract facts and promote lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// OpenAI-compatible base URL ending in `/v1`; empty means the offline decider.
    pub base_url: String,
    pub model: String,
    /// The model that decides consolidation (often a cheaper one than extraction needs);
    /// empty: `model`.
    pub consolidation_model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    pub api_key_env: String,
    pub timeout_secs: u64,
    /// Retries on connection errors, 429 and 5xx, with exponential backoff.
    pub max_retries: u32,
    pub temperature: f32,
    /// Upper bound on reply tokens per call.
    pub max_tokens: u32,
    /// Directory whose `consolidate.md`, `extract.md`, `promote.md` replace the built-in prompts.
    pub prompts_dir: String,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: String::new(),
            model: "qwen2.5:7b-instruct".into(),
            consolidation_model: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            timeout_secs: 120,
            max_retries: 3,
            temperature: 0.0,
            max_tokens: 2048,
            prompts_dir: String::new(),
        }
    }
}

impl LlmConfig {
    /// Whether a chat endpoint is configured.
    pub fn enabled(&self) -> bool {
        !self.base_url.trim().is_empty()
    }
}

/// Which embedder makes the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingProvider {
    /// MiniLM when its files are at `model_dir` or where README's set-up puts them
    /// (`~/.local/share/memfold/minilm`), else `local`.
    Auto,
    /// Hashed word and character n-grams, built in, no weights.
    Local,
    /// all-MiniLM-L6-v2 in process (candle), from `model_dir`.
    Minilm,
    /// Any OpenAI-compatible `/v1/embeddings` endpoint.
    Openai,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    pub provider: EmbeddingProvider,
    /// For `minilm`: directory holding `model.safetensors` and `tokenizer.json`.
    pub model_dir: String,
    /// For `openai`.
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    pub timeout_secs: u64,
    pub max_retries: u32,
    /// Texts per request / forward pass.
    pub batch_size: usize,
    /// Vector length of the `local` embedder.
    pub local_dim: usize,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        EmbeddingConfig {
            provider: EmbeddingProvider::Auto,
            model_dir: String::new(),
            base_url: String::new(),
            model: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            timeout_secs: 60,
            max_retries: 3,
            batch_size: 64,
            local_dim: 384,
        }
    }
}

/// Consolidation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Passes apply their plan.
    Auto,
    /// Passes store their plan under `.memfold/plans/` for `memfold apply`.
    Review,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsolidationConfig {
    /// The master switch: off, no pass runs (not even a forced one) and nothing is decided;
    /// facts keep arriving and stay searchable.
    pub enabled: bool,
    pub mode: Mode,
    /// Hours since the last pass before the gate opens.
    pub min_hours: f64,
    /// Unconsolidated facts before the gate opens.
    pub min_facts: usize,
    /// How often the daemon checks the gate.
    pub interval_seconds: u64,
    /// Neighbours per new fact, among entries and among other new facts.
    pub neighbor_k: usize,
    /// Full-text candidates per new fact, added to the vector neighbours.
    pub lexical_k: usize,
    /// Entries each new fact is shown besides its ranked neighbours because they share an
    /// aspect key with it (`subject / attribute`), best first; 0 turns aspect keys off.
    pub aspect_k: usize,
    /// A TOML file of life aspects added to the built-in taxonomy (same format as
    /// `src/consolidate/aspects/taxonomy.toml`; an aspect of the same name replaces the built-in one).
    pub aspects_file: String,
    /// Cosine below which two new facts are not linked by their vectors. Entries are shown by
    /// rank alone (every fact sees its top `neighbor_k`); this never merges anything.
    pub min_similarity: f32,
    /// Most new facts decided in one call (its reply must hold their ops).
    pub cluster_max: usize,
    /// Estimated prompt tokens (system prompt included) one decision call is packed up to. A
    /// fact whose ranked entries alone exceed it still gets all of them, in a call of its own.
    pub call_budget_tokens: u64,
    /// Longest accepted entry content, in characters.
    pub max_content_chars: usize,
    /// Unusable replies before a fact is left for a person (or a forced pass); an unavailable
    /// LLM costs no attempts.
    pub max_attempts: u32,
    /// Ops with a confidence below this go to review even in `auto` mode.
    pub review_below_confidence: f64,
    /// Whether the offline decider folds beyond its text rules: certain duplicates apply and
    /// likely folds (a negation, a correction, a new value) are proposed for review. `false`
    /// keeps the text rules alone (nothing is proposed).
    pub offline_folds: bool,
    /// The kinds of op a pass applies on its own in `auto` mode (`ADD`, `REPLACE`, `REMOVE`,
    /// `DUPLICATE`); the others go to review.
    pub auto_apply: Vec<String>,
    /// Hours between sweeps of the current entries for duplicates and contradictions
    /// (`memfold sweep`); 0 = only on request. A sweep stores what it finds for review.
    pub sweep_interval_hours: f64,
    /// The most decision calls one sweep makes with an LLM; the entries left over are swept next time.
    pub sweep_max_calls: usize,
}

impl Default for ConsolidationConfig {
    fn default() -> Self {
        ConsolidationConfig {
            enabled: true,
            mode: Mode::Auto,
            min_hours: 24.0,
            min_facts: 20,
            interval_seconds: 1800,
            neighbor_k: 8,
            lexical_k: 4,
            aspect_k: 6,
            aspects_file: String::new(),
            min_similarity: 0.25,
            cluster_max: 25,
            call_budget_tokens: 4000,
            max_content_chars: 2000,
            max_attempts: 5,
            review_below_confidence: 0.5,
            offline_folds: true,
            auto_apply: ["ADD", "REPLACE", "REMOVE", "DUPLICATE"].map(String::from).to_vec(),
            sweep_interval_hours: 0.0,
            sweep_max_calls: 50,
        }
    }
}

/// How long proposals wait for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReviewConfig {
    /// Days a stored plan waits for `apply` or `reject` before it expires and its facts are
    /// decided again by the next pass; 0 = plans never expire.
    pub expire_days: u32,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig { expire_days: 30 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromotionConfig {
    /// Cap on lines in `MEMORY.md`.
    pub memory_max_lines: usize,
}

impl Default for PromotionConfig {
    fn default() -> Self {
        PromotionConfig { memory_max_lines: 200 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecallConfig {
    /// Days of search hits kept in `.memfold/recall.jsonl`.
    pub window_days: u32,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig { window_days: 30 }
    }
}

/// Decay by use: how an entry's last recall weighs in search and when an unused entry is
/// proposed for retirement (`memfold sweep --stale`). Pinned entries and `MEMORY.md`'s lines
/// are exempt from both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecayConfig {
    /// Weight of the use term in search: an entry used today (recalled, written or changed)
    /// gains this much, one unused for a half-life half of it (0 disables it).
    pub weight: f64,
    pub half_life_days: f64,
    /// Days without use after which a sweep proposes retiring an entry; 0 = never.
    pub retire_after_days: u32,
}

impl Default for DecayConfig {
    fn default() -> Self {
        DecayConfig { weight: 0.1, half_life_days: 180.0, retire_after_days: 365 }
    }
}

/// Sync through git (`memfold sync`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SyncConfig {
    /// The git remote a root syncs with (any address git takes: a path, ssh, https). The
    /// daemon sets a root up for sync with it the first time, as `memfold sync --init` does;
    /// empty: only what `memfold sync --init REMOTE` set up.
    pub remote: String,
    /// Minutes between the daemon's syncs; 0 syncs only after a pass that applied something
    /// (and on `memfold sync`).
    pub interval_minutes: u64,
}

/// The agent hooks (`memfold hook EVENT`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// Recall for a prompt only entries at least this similar to it (cosine, -1 to 1); absent:
    /// the bar measured for the embedder in use (`models::embed::recall_bar`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_similarity: Option<f64>,
    /// The least score the best line recalled for a prompt needs (its cosine plus what the
    /// prompt's words and dates add): below it the prompt is about something memory does not
    /// hold, and nothing is recalled.
    pub prompt_min_score: f64,
    /// A line recalled after the best needs a score at least the best's less this (the score is
    /// the cosine plus `prompt_words_weight` times the share of the prompt's words it holds).
    pub prompt_gap: f64,
    /// Weight of the prompt's own words, against the cosine, in a line's score.
    pub prompt_words_weight: f64,
    /// Added to the score of a line dated in a day, month or year the prompt names ("in June",
    /// "yesterday", "last week", "on 3 June, 2023").
    pub prompt_dates_weight: f64,
    /// Entries recalled for a prompt, at most.
    pub prompt_k: usize,
    /// Characters recalled for a prompt, at most.
    pub prompt_max_chars: usize,
    /// Characters a session start adds to the agent's context, at most (the agents cap
    /// hook output at 10,000).
    pub session_start_max_chars: usize,
    /// How long a hook waits for the daemon before it answers from the files, in milliseconds.
    pub daemon_timeout_ms: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            min_similarity: None,
            prompt_min_score: 0.6,
            prompt_gap: 0.15,
            prompt_words_weight: 0.75,
            prompt_dates_weight: 0.3,
            prompt_k: 3,
            prompt_max_chars: 2_000,
            session_start_max_chars: 10_000,
            daemon_timeout_ms: 1_500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// Hits returned when `-k` / `k` is not given.
    pub default_k: usize,
    /// Weight of the recency term added to the fused score (0 disables it).
    pub recency_weight: f64,
    /// Half-life of the recency term, in days.
    pub recency_half_life_days: f64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig { default_k: 10, recency_weight: 0.1, recency_half_life_days: 90.0 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub bind: String,
    /// Require a bearer token (the root's `.memfold/token`, or `token_env`'s). `false` is
    /// refused on an address beyond loopback.
    pub auth: bool,
    /// Name of a variable holding the bearer token, instead of the root's token file.
    pub token_env: String,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// `POST /consolidate` answers 202 with a request id when a pass takes longer than this.
    pub request_timeout_secs: u64,
    /// Host names (with an optional port) the server answers to besides the loopback names
    /// and the bind address (the HTTP door's guard).
    pub allowed_hosts: Vec<String>,
    /// A request head must arrive within this many seconds of the connection opening, or of
    /// the previous response on a kept-alive connection (so it is the idle timeout too).
    pub header_timeout_secs: u64,
    /// A request body must keep arriving: no wait between two parts of it longer than this,
    /// and the whole body within it for the JSON routes.
    pub body_timeout_secs: u64,
    /// Connections served at once; more wait to be accepted. 0: as many as the process's file
    /// limit leaves room for, after raising its soft limit to the hard one (see
    /// `crate::sys::limits`).
    pub max_connections: usize,
    /// MCP sessions open at once on `/mcp`; a new one past it is refused (503).
    pub max_mcp_sessions: usize,
    /// Seconds without a write after which the daemon folds small writes back into the index's
    /// indices (it also does at start).
    pub settle_idle_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1:7878".into(),
            token_env: String::new(),
            max_body_bytes: 1 << 20,
            request_timeout_secs: 60,
            allowed_hosts: Vec::new(),
            auth: true,
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            max_connections: 0,
            max_mcp_sessions: 32,
            settle_idle_secs: 60,
        }
    }
}

/// Who may own the memory root.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// Let a process running as root use a memory root (or files in it) owned by another
    /// account. Off: such a process refuses, naming the owner.
    pub allow_other_owner: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeConfig {
    /// Where days begin: `local` (the machine's zone), `utc`, or a fixed offset like `+02:00`.
    pub zone: String,
}

impl Default for TimeConfig {
    fn default() -> Self {
        TimeConfig { zone: "local".into() }
    }
}

/// A home's spaces, as one daemon serves them (`[spaces]` in the home's `memfold.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpacesConfig {
    /// Make a space on its first write (the agent hooks name a space per project).
    pub auto_create: bool,
    /// Spaces every space's search also reads; each hit says which space it came from.
    pub shared: Vec<String>,
    /// Spaces a daemon keeps open at once; the least recently used idle one closes first.
    pub max_open: usize,
    /// Seconds a space may go unused (no request, no pass) before it closes; it opens again
    /// on its next request. 0: spaces close only past `max_open`.
    pub close_idle_secs: u64,
    /// Consolidation passes a daemon runs at once across its spaces.
    pub max_concurrent_passes: usize,
    /// Spaces `/metrics` names one by one (the largest); the rest are summed.
    pub metrics_top: usize,
}

impl Default for SpacesConfig {
    fn default() -> Self {
        SpacesConfig {
            auto_create: false,
            shared: Vec::new(),
            max_open: 64,
            close_idle_secs: 300,
            max_concurrent_passes: 1,
            metrics_top: 10,
        }
    }
}

/// Values from the command line, the top of the precedence order.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub root: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub space: Option<String>,
}

impl Config {
    /// Load from defaults, the config file, the process environment and `flags`.
    pub fn load(flags: &Overrides) -> Result<Config, ConfigError> {
        let env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("MEMFOLD_")).collect();
        Config::load_with_env(flags, &env)
    }

    /// As [`Config::load`], with the environment given explicitly (for tests).
    pub fn load_with_env(flags: &Overrides, env: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let home = flags.home.clone().or_else(|| env.get("MEMFOLD_HOME").filter(|h| !h.is_empty()).map(PathBuf::from));
        if let Some(home) = home {
            return Config::load_home(&expand_tilde(&home), flags, env);
        }
        if let Some(space) = flags.space.as_ref() {
            return Err(ConfigError::Invalid {
                origin: "--space".into(),
                message: format!("{space:?} names a space, but no home holds it: give --home DIR (or MEMFOLD_HOME)"),
            });
        }
        // Root decides where the default config file is, so resolve it first.
        let explicit_file = flags.config.clone();
        let mut table = match &explicit_file {
            Some(path) => read_table(path)?,
            None => toml::Table::new(),
        };
        let root_from_env = env.get("MEMFOLD_ROOT").map(PathBuf::from);
        let root = flags
            .root
            .clone()
            .or(root_from_env.clone())
            .or_else(|| table.get("root").and_then(|v| v.as_str()).map(PathBuf::from))
            .unwrap_or_else(|| Config::default().root);
        let root = expand_tilde(&root);
        if explicit_file.is_none() {
            let path = root.join("memfold.toml");
            if path.exists() {
                table = read_table(&path)?;
            }
        }
        apply_env(&mut table, env)?;
        table.insert("root".into(), toml::Value::String(root.to_string_lossy().into_owned()));
        let origin = explicit_file
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| root.join("memfold.toml").display().to_string());
        let config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid { origin, message: e.message().to_string() })?;
        config.check()?;
        Ok(config)
    }

    /// The configuration of `home`: its `memfold.toml` (or `--config`), and for a space the
    /// space's own `memfold.toml` over it; then the environment.
    fn load_home(home: &Path, flags: &Overrides, env: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        if flags.root.is_some() {
            return Err(ConfigError::Invalid {
                origin: "--root".into(),
                message: "a root and a home were both given: a home's spaces are its roots (--home DIR --space NAME)"
                    .into(),
            });
        }
        let origin = flags.config.clone().unwrap_or_else(|| home.join("memfold.toml"));
        let mut table = match (&flags.config, origin.exists()) {
            (Some(path), _) => read_table(path)?,
            (None, true) => read_table(&origin)?,
            (None, false) => toml::Table::new(),
        };
        table.remove("root");
        let space = flags.space.clone().or_else(|| env.get("MEMFOLD_SPACE").filter(|s| !s.is_empty()).cloned());
        let root = match &space {
            Some(name) => {
                crate::home::check_name(name)
                    .map_err(|message| ConfigError::Invalid { origin: "--space".into(), message })?;
                let root = home.join("spaces").join(name);
                let own = root.join("memfold.toml");
                if own.exists() {
                    let mut theirs = read_table(&own)?;
                    theirs.remove("root");
                    // How the daemon serves and schedules is the home's to say.
                    for section in ["server", "spaces"] {
                        if theirs.remove(section).is_some() {
                            tracing::warn!(
                                file = %own.display(),
                                "[{section}] in a space's memfold.toml is ignored: the home's memfold.toml sets it for every space"
                            );
                        }
                    }
                    merge_tables(&mut table, theirs);
                }
                root
            }
            None => home.to_path_buf(),
        };
        apply_env(&mut table, env)?;
        table.insert("root".into(), toml::Value::String(root.to_string_lossy().into_owned()));
        let mut config: Config = toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| {
            ConfigError::Invalid { origin: origin.display().to_string(), message: e.message().to_string() }
        })?;
        config.check()?;
        (config.home, config.space) = (Some(home.to_path_buf()), space);
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, message: &str| {
            Err(ConfigError::Invalid { origin: key.to_string(), message: message.to_string() })
        };
        if self.ingest.max_fact_bytes == 0 {
            return bad("ingest.max_fact_bytes", "must be at least 1");
        }
        if let Some(kind) = self.consolidation.auto_apply.iter().find(|k| {
            !["ADD", "REPLACE", "REMOVE", "DUPLICATE", "STALE"].iter().any(|known| known.eq_ignore_ascii_case(k))
        }) {
            return bad(
                "consolidation.auto_apply",
                &format!("names {kind:?}; the kinds are ADD, REPLACE, REMOVE, DUPLICATE and STALE"),
            );
        }
        if !(self.decay.weight.is_finite() && self.decay.weight >= 0.0) {
            return bad("decay.weight", "must be a number, 0 or more");
        }
        if !(self.decay.half_life_days.is_finite() && self.decay.half_life_days > 0.0) {
            return bad("decay.half_life_days", "must be more than 0");
        }
        if self.consolidation.cluster_max == 0 {
            return bad("consolidation.cluster_max", "must be at least 1");
        }
        if self.consolidation.call_budget_tokens == 0 {
            return bad("consolidation.call_budget_tokens", "must be at least 1");
        }
        if self.consolidation.neighbor_k == 0 {
            return bad("consolidation.neighbor_k", "must be at least 1");
        }
        if self.promotion.memory_max_lines == 0 {
            return bad("promotion.memory_max_lines", "must be at least 1");
        }
        if self.embedding.batch_size == 0 {
            return bad("embedding.batch_size", "must be at least 1");
        }
        if self.embedding.local_dim < 16 {
            return bad("embedding.local_dim", "must be at least 16");
        }
        if self.embedding.provider == EmbeddingProvider::Openai && self.embedding.base_url.trim().is_empty() {
            return bad("embedding.base_url", "is required when embedding.provider = \"openai\"");
        }
        if self.embedding.provider == EmbeddingProvider::Minilm && self.embedding.model_dir.trim().is_empty() {
            return bad("embedding.model_dir", "is required when embedding.provider = \"minilm\"");
        }
        if let Err(message) = Zone::parse(&self.time.zone) {
            return bad("time.zone", &message);
        }
        for entry in &self.server.allowed_hosts {
            check_allowed_host(entry).or_else(|message| bad("server.allowed_hosts", &message))?;
        }
        if let Some(bar) = self.hooks.min_similarity
            && !(-1.0..=1.0).contains(&bar)
        {
            return bad("hooks.min_similarity", "must be a cosine, from -1 to 1");
        }
        for (key, value) in [
            ("hooks.prompt_min_score", self.hooks.prompt_min_score),
            ("hooks.prompt_gap", self.hooks.prompt_gap),
            ("hooks.prompt_words_weight", self.hooks.prompt_words_weight),
            ("hooks.prompt_dates_weight", self.hooks.prompt_dates_weight),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return bad(key, "must be a number, 0 or more");
            }
        }
        for (key, value) in [
            ("hooks.prompt_k", self.hooks.prompt_k),
            ("server.header_timeout_secs", self.server.header_timeout_secs as usize),
            ("server.body_timeout_secs", self.server.body_timeout_secs as usize),
            ("server.max_mcp_sessions", self.server.max_mcp_sessions),
            ("server.settle_idle_secs", self.server.settle_idle_secs as usize),
        ] {
            if value == 0 {
                return bad(key, "must be at least 1");
            }
        }
        Ok(())
    }

    /// The clock every day and time memfold writes comes from.
    pub fn clock(&self) -> Clock {
        Clock::new(Zone::parse(&self.time.zone).unwrap_or(Zone::Local))
    }

    /// The bearer token the server requires, if `server.token_env` names a set variable.
    pub fn server_token_env(&self) -> Option<String> {
        if self.server.token_env.is_empty() {
            return None;
        }
        std::env::var(&self.server.token_env).ok().filter(|t| !t.is_empty())
    }
}

fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    text.parse::<toml::Table>()
        .map_err(|e| ConfigError::Invalid { origin: path.display().to_string(), message: e.to_string() })
}

/// Variables read elsewhere that are not configuration keys.
const NON_KEY_VARS: &[&str] = &["MEMFOLD_ROOT", "MEMFOLD_LOG", "MEMFOLD_CONFIG", "MEMFOLD_HOME", "MEMFOLD_SPACE"];
/// Prefixes of variables that belong to memfold's own tests and benchmarks, not to configuration.
const NON_KEY_PREFIXES: &[&str] = &["MEMFOLD_TEST_", "MEMFOLD_BENCH_"];

fn apply_env(table: &mut toml::Table, env: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let defaults = toml::Table::try_from(Config::default()).expect("defaults serialise");
    for (var, raw) in env {
        if NON_KEY_VARS.contains(&var.as_str()) || NON_KEY_PREFIXES.iter().any(|p| var.starts_with(p)) {
            continue;
        }
        let Some(rest) = var.strip_prefix("MEMFOLD_") else { continue };
        let unknown = || ConfigError::Env { var: var.clone(), message: "is not a configuration key".into() };
        let (section, key) = rest.split_once("__").ok_or_else(unknown)?;
        let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
        let default =
            defaults.get(&section).and_then(|s| s.as_table()).and_then(|s| s.get(&key)).ok_or_else(unknown)?;
        let value = env_value(raw, default).map_err(|message| ConfigError::Env { var: var.clone(), message })?;
        let entry = table.entry(section).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(section) = entry else {
            return Err(ConfigError::Env {
                var: var.clone(),
                message: "its section is not a table in the file".into(),
            });
        };
        section.insert(key, value);
    }
    Ok(())
}

/// `over`'s keys on top of `base`'s, section by section.
fn merge_tables(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(mine)), toml::Value::Table(theirs)) => merge_tables(mine, theirs),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Parse an environment value as the type of the key's default.
fn env_value(raw: &str, default: &toml::Value) -> Result<toml::Value, String> {
    let raw = raw.trim();
    Ok(match default {
        toml::Value::String(_) => toml::Value::String(raw.to_string()),
        toml::Value::Integer(_) => {
            toml::Value::Integer(raw.parse().map_err(|_| format!("expected an integer, got {raw:?}"))?)
        }
        toml::Value::Float(_) => {
            toml::Value::Float(raw.parse().map_err(|_| format!("expected a number, got {raw:?}"))?)
        }
        toml::Value::Boolean(_) => {
            toml::Value::Boolean(raw.parse().map_err(|_| format!("expected true or false, got {raw:?}"))?)
        }
        // A list of strings, comma-separated.
        toml::Value::Array(_) => toml::Value::Array(
            raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| toml::Value::String(s.into())).collect(),
        ),
        _ => return Err("cannot be set from the environment".into()),
    })
}

/// Expand a leading `~` to `$HOME`.
pub fn expand_tilde(path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix("~") else { return path.to_path_buf() };
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(rest),
        None => path.to_path_buf(),
    }
}

/// A host name or IP address with an optional port, as in a `Host` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// Lowercase; an IPv6 address in brackets and in its shortest form (`[::1]`).
    pub name: String,
    pub port: Option<u16>,
}

impl Authority {
    /// Parse `name`, `name:port`, `[v6]` or `[v6]:port`; None for anything else (a scheme,
    /// a path, user info, an empty name or port, characters no host name has).
    pub fn parse(text: &str) -> Option<Authority> {
        let (name, port) = if let Some(rest) = text.strip_prefix('[') {
            let (v6, after) = rest.split_once(']')?;
            let v6: std::net::Ipv6Addr = v6.parse().ok()?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (format!("[{v6}]"), port)
        } else {
            let (name, port) = match text.split_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (text, None),
            };
            let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if name.is_empty() || !name.chars().all(plain) {
                return None;
            }
            (name.to_ascii_lowercase(), port)
        };
        let port = match port {
            None => None,
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                Some(digits.parse().ok()?)
            }
            Some(_) => return None,
        };
        Some(Authority { name, port })
    }

    pub fn of(ip: std::net::IpAddr, port: u16) -> Authority {
        let name = match ip {
            std::net::IpAddr::V4(ip) => ip.to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        };
        Authority { name, port: Some(port) }
    }

    /// The port a client meant: the one given, else `default` (the scheme's).
    pub fn port_or(&self, default: u16) -> u16 {
        self.port.unwrap_or(default)
    }
}

impl std::fmt::Display for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Check a `server.allowed_hosts` entry: a host name or IP address, with an optional port.
pub fn check_allowed_host(entry: &str) -> Result<(), String> {
    match Authority::parse(entry.trim()) {
        Some(_) => Ok(()),
        None => Err(format!(
            "{entry:?} is not a host name or IP address with an optional port (e.g. \"memfold.lan\", \"10.0.0.5:7878\", \"[fd00::5]\")"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_host_entries_are_checked() {
        assert!(check_allowed_host("memfold.lan").is_ok());
        assert!(check_allowed_host("[fd00::5]:7878").is_ok());
        let err = check_allowed_host("http://memfold.lan").unwrap_err();
        assert!(err.contains("http://memfold.lan"), "{err}");
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("memfold.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn defaults_match_the_design() {
        let c = Config::default();
        assert_eq!(c.consolidation.min_hours, 24.0);
        assert_eq!(c.consolidation.min_facts, 20);
        assert_eq!(c.consolidation.interval_seconds, 1800);
        assert_eq!(c.consolidation.neighbor_k, 8);
        assert_eq!(c.consolidation.cluster_max, 25);
        assert_eq!(c.promotion.memory_max_lines, 200);
        assert_eq!(c.server.bind, "127.0.0.1:7878");
        assert_eq!(c.ingest.max_fact_bytes, 8192);
        assert_eq!(c.embedding.provider, EmbeddingProvider::Auto);
        assert!(!c.llm.enabled());
    }

    #[test]
    fn file_then_env_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "[consolidation]\nmin_facts = 5\nmin_hours = 2.5\n[llm]\nmodel = \"file-model\"\n");
        let flags = Overrides { root: Some(dir.path().to_path_buf()), config: None, ..Overrides::default() };
        let c = Config::load_with_env(&flags, &env(&[("MEMFOLD_CONSOLIDATION__MIN_FACTS", "7")])).unwrap();
        assert_eq!(c.consolidation.min_facts, 7, "env beats file");
        assert_eq!(c.consolidation.min_hours, 2.5, "file beats default");
        assert_eq!(c.llm.model, "file-model");
        assert_eq!(c.root, dir.path());
    }

    #[test]
    fn root_flag_beats_env_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "root = \"/from/file\"\n");
        let flags = Overrides { root: None, config: Some(file.clone()), ..Overrides::default() };
        let c = Config::load_with_env(&flags, &env(&[])).unwrap();
        assert_eq!(c.root, PathBuf::from("/from/file"));
        let c = Config::load_with_env(&flags, &env(&[("MEMFOLD_ROOT", "/from/env")])).unwrap();
        assert_eq!(c.root, PathBuf::from("/from/env"));
        let flags = Overrides { root: Some("/from/flag".into()), config: Some(file), ..Overrides::default() };
        let c = Config::load_with_env(&flags, &env(&[("MEMFOLD_ROOT", "/from/env")])).unwrap();
        assert_eq!(c.root, PathBuf::from("/from/flag"));
    }

    #[test]
    fn unknown_file_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "[consolidation]\nmin_factz = 5\n");
        let err =
            Config::load_with_env(&Overrides { root: None, config: Some(file), ..Overrides::default() }, &env(&[]))
                .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("min_factz"), "{msg}");
        assert!(msg.contains("memfold.toml"), "{msg}");
    }

    #[test]
    fn a_file_written_for_cluster_max_still_loads_and_a_zero_budget_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "[consolidation]\ncluster_max = 2000\n");
        let c = Config::load_with_env(&Overrides { root: None, config: Some(file), ..Overrides::default() }, &env(&[]))
            .unwrap();
        assert_eq!((c.consolidation.cluster_max, c.consolidation.call_budget_tokens), (2000, 4000));
        let file = write(dir.path(), "[consolidation]\ncall_budget_tokens = 0\n");
        let err =
            Config::load_with_env(&Overrides { root: None, config: Some(file), ..Overrides::default() }, &env(&[]))
                .unwrap_err();
        assert!(err.to_string().contains("consolidation.call_budget_tokens"), "{err}");
    }

    #[test]
    fn the_recall_settings_out_of_range_are_named() {
        let dir = tempfile::tempdir().unwrap();
        for (text, key) in [
            ("[hooks]\nmin_similarity = 2.0\n", "hooks.min_similarity"),
            ("[hooks]\nprompt_gap = -0.1\n", "hooks.prompt_gap"),
            ("[hooks]\nprompt_words_weight = nan\n", "hooks.prompt_words_weight"),
            ("[hooks]\nprompt_k = 0\n", "hooks.prompt_k"),
        ] {
            let file = write(dir.path(), text);
            let err =
                Config::load_with_env(&Overrides { root: None, config: Some(file), ..Overrides::default() }, &env(&[]))
                    .unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        let file = write(dir.path(), "[hooks]\nmin_similarity = 0.5\n");
        let c = Config::load_with_env(&Overrides { root: None, config: Some(file), ..Overrides::default() }, &env(&[]))
            .unwrap();
        assert_eq!(c.hooks.min_similarity, Some(0.5));
    }

    #[test]
    fn unknown_section_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "[llmm]\nmodel = \"x\"\n");
        let err =
            Config::load_with_env(&Overrides { root: None, config: Some(file), ..Overrides::default() }, &env(&[]))
                .unwrap_err();
        assert!(err.to_string().contains("llmm"), "{err}");
    }

    #[test]
    fn unknown_env_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let flags = Overrides { root: Some(dir.path().into()), config: None, ..Overrides::default() };
        let err = Config::load_with_env(&flags, &env(&[("MEMFOLD_LLM__MODLE", "x")])).unwrap_err();
        assert!(err.to_string().contains("MEMFOLD_LLM__MODLE"), "{err}");
        let err = Config::load_with_env(&flags, &env(&[("MEMFOLD_CONSOLIDATION__MIN_FACTS", "many")])).unwrap_err();
        assert!(err.to_string().contains("expected an integer"), "{err}");
    }

    #[test]
    fn test_and_bench_variables_are_not_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let flags = Overrides { root: Some(dir.path().into()), config: None, ..Overrides::default() };
        let vars = env(&[("MEMFOLD_TEST_MINILM_DIR", "/x"), ("MEMFOLD_BENCH_FACTS", "10"), ("MEMFOLD_LOG", "debug")]);
        Config::load_with_env(&flags, &vars).unwrap();
        let err = Config::load_with_env(&flags, &env(&[("MEMFOLD_TESTS", "1")])).unwrap_err();
        assert!(err.to_string().contains("MEMFOLD_TESTS"), "{err}");
    }

    #[test]
    fn env_sets_enums_and_strings() {
        let dir = tempfile::tempdir().unwrap();
        let flags = Overrides { root: Some(dir.path().into()), config: None, ..Overrides::default() };
        let c = Config::load_with_env(
            &flags,
            &env(&[("MEMFOLD_LLM__BASE_URL", "http://127.0.0.1:1/v1"), ("MEMFOLD_CONSOLIDATION__MODE", "review")]),
        )
        .unwrap();
        assert!(c.llm.enabled());
        assert_eq!(c.consolidation.mode, Mode::Review);
    }

    #[test]
    fn allowed_hosts_come_from_the_file_or_a_comma_separated_variable() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "[server]\nallowed_hosts = [\"memfold.lan\"]\n");
        let flags = Overrides { root: Some(dir.path().into()), config: None, ..Overrides::default() };
        let c = Config::load_with_env(&flags, &env(&[])).unwrap();
        assert_eq!(c.server.allowed_hosts, ["memfold.lan"]);
        let vars = env(&[("MEMFOLD_SERVER__ALLOWED_HOSTS", " a.lan, 10.0.0.5:7878 ,")]);
        let c = Config::load_with_env(&flags, &vars).unwrap();
        assert_eq!(c.server.allowed_hosts, ["a.lan", "10.0.0.5:7878"]);
        let vars = env(&[("MEMFOLD_SERVER__ALLOWED_HOSTS", "https://a.lan/")]);
        let err = Config::load_with_env(&flags, &vars).unwrap_err().to_string();
        assert!(err.contains("server.allowed_hosts") && err.contains("https://a.lan/"), "{err}");
    }

    #[test]
    fn example_file_lists_every_key_with_its_default() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config.example.toml")).unwrap();
        let example: Config = toml::from_str(&text).expect("config.example.toml parses with deny_unknown_fields");
        let defaults = Config { root: example.root.clone(), ..Config::default() };
        assert_eq!(example, defaults, "config.example.toml shows the defaults");
        let every = toml::Table::try_from(Config::default()).unwrap();
        let listed: toml::Table = text.parse().unwrap();
        for (section, keys) in every.iter().filter_map(|(s, v)| v.as_table().map(|t| (s, t))) {
            for key in keys.keys() {
                assert!(
                    listed.get(section).and_then(|s| s.get(key)).is_some(),
                    "config.example.toml does not document {section}.{key}"
                );
            }
        }
    }
}
