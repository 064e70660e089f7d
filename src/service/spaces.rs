//! The spaces one daemon serves: a lone root, or every space of a home, each behind its own
//! [`Service`], opened when first asked for and closed when idle.
//!
//! **The token decides the space.** Each space has a token of its own (`.memfold/token` in its
//! root); it opens that space and nothing else ([`super::Access::Space`]). A home also has the
//! operator's token (`<home>/.memfold/token`), which reaches any space when the request names
//! it ([`super::Access::Operator`]). Nothing else a client sends selects a space: the doors ask
//! [`Keys::access`] who the token is and never read a space from a path, a parameter or a
//! tool's arguments (the HTTP door's `/spaces/<name>/` prefix is for the operator alone).
//!
//! **Resources.** At most `spaces.max_open` spaces are open at once; opening one more closes
//! the least recently used idle one (one a request or a pass still holds stays open). A space
//! opens with the models the others use ([`Models`]: one embedder model, one chat client), one
//! file watcher serves them all, and one scheduler runs their passes (it decides when:
//! [`super::scheduler`] keeps the gates). Opening takes the
//! space's serve lock, so no second daemon serves it meanwhile. A space that fails to open
//! answers with an error naming it; the others keep serving.

use memfold_store::sys::guard as lock;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::Service;
use super::access::Keys;
use super::metrics::{Gauges, Metrics, SpaceGauges};
use super::passes::{self, PassRequest, Requests};
use super::watch::WatchHandle;
use memfold_core::error::Error;
use memfold_core::memory::Memory;
use memfold_models::Models;
use memfold_store::Root;
use memfold_store::config::{Config, Overrides};
use memfold_store::home::Home;
use memfold_store::sys::clock;
use memfold_store::sys::lock::LockGuard;

/// What a daemon serves.
enum Served {
    /// One root (`--root`): one space, named "".
    Root,
    /// The spaces of a home (`--home`).
    Home(Home),
}

/// An open space.
struct Open {
    name: String,
    service: Arc<Service>,
    /// When a request last asked for the space.
    used: Instant,
    /// Dropped when the space closes: its indexer stops.
    _stop: watch::Sender<bool>,
    /// The space's serve lock, in a home.
    _lock: Option<LockGuard>,
}

/// One space in the listing (`memfold spaces`, `GET /spaces`).
#[derive(Debug, Clone, Serialize)]
pub struct SpaceSummary {
    pub name: String,
    pub entries: usize,
    pub pending_facts: usize,
    pub last_pass: Option<DateTime<Utc>>,
    /// Bytes of everything in the space's folder, the index included.
    pub disk_bytes: u64,
    /// The newest change to its archive, `memory.md` or recall log (a write or a search).
    pub last_use: Option<DateTime<Utc>>,
    pub shared: bool,
    pub open: bool,
}

/// The spaces of a daemon (or of `memfold mcp`).
pub struct Spaces {
    served: Served,
    /// The home's configuration (for a lone root, the root's).
    config: Config,
    me: Weak<Spaces>,
    open: Mutex<Vec<Open>>,
    /// One opening at a time, so a space is never opened twice.
    opening: tokio::sync::Mutex<()>,
    /// Who each token lets in.
    keys: Keys,
    models: Arc<Models>,
    metrics: Arc<Metrics>,
    passes: mpsc::Sender<PassRequest>,
    watcher: Mutex<Option<WatchHandle>>,
    /// Whether spaces hold their rows in memory and index in the background (a daemon).
    daemon: bool,
    started: Instant,
    started_at: DateTime<Utc>,
    /// The last summaries `/metrics` read, and when.
    summaries: Mutex<Option<(Instant, Vec<SpaceSummary>)>>,
    /// Searches answered from held vectors by spaces since closed (`/metrics` counts on).
    retired_held_searches: std::sync::atomic::AtomicU64,
    /// The indexers of the open spaces (each stops when its space closes).
    indexers: Mutex<tokio::task::JoinSet<()>>,
}

/// Whether space `from` may share an entry into space `to` of the home configured by `home`
/// (None: a lone root, which has no spaces to share into).
pub fn check_share(home: Option<&Config>, from: &str, to: &str) -> Result<(), Error> {
    let Some(config) = home else {
        return Err(Error::BadInput(
            "share copies an entry into a shared space of a home: a lone root has none (memfold --home DIR --space NAME)"
                .into(),
        ));
    };
    if !config.spaces.shared.iter().any(|s| s == to) {
        return Err(Error::Forbidden(format!(
            "{to:?} is not a shared space of this home: entries are shared into the spaces of [spaces] shared"
        )));
    }
    if to == from {
        return Err(Error::BadInput(format!("the entry is in space {to} already")));
    }
    Ok(())
}

impl Spaces {
    /// The spaces of a lone root, whose `memory` is already open, and the worker that runs its
    /// passes. `daemon`: the passes also run on the interval (`memfold serve`) rather than only
    /// when asked (`memfold mcp`), and the root holds its rows and indexes in the background.
    pub fn root(memory: Memory, daemon: bool) -> (Arc<Spaces>, Requests) {
        let config = memory.config().clone();
        let (spaces, worker) = Spaces::new(Served::Root, config, daemon);
        let service = spaces.service_over(String::new(), memory);
        let stop = spaces.start_space(&service, false);
        lock(&spaces.open).push(Open { name: String::new(), service, used: Instant::now(), _stop: stop, _lock: None });
        (spaces, worker)
    }

    /// The spaces of the home of `memory`, a space already open (`memfold --space S mcp`): its
    /// searches read the home's shared spaces too. Nothing here serves the home, so no serve
    /// lock is taken; the shared spaces are read as `memfold search` reads them.
    /// Without a home, as [`Spaces::root`].
    pub fn space(memory: Memory) -> (Arc<Spaces>, Requests) {
        let config = memory.config().clone();
        let (Some(dir), Some(name)) = (config.home.clone(), config.space.clone()) else {
            return Spaces::root(memory, false);
        };
        let (spaces, worker) = Spaces::new(Served::Home(Home::new(dir)), config, false);
        let service = spaces.service_over(name.clone(), memory);
        let stop = spaces.start_space(&service, false);
        lock(&spaces.open).push(Open { name, service, used: Instant::now(), _stop: stop, _lock: None });
        (spaces, worker)
    }

    /// The spaces of the home `config` names (its home's configuration), none open yet.
    pub fn home(config: Config) -> Result<(Arc<Spaces>, Requests), Error> {
        let dir = config.home.clone().ok_or_else(|| Error::BadInput("no home given (--home DIR)".into()))?;
        let home = Home::new(dir);
        home.check_not_a_root().map_err(Error::BadInput)?;
        home.init().map_err(|source| Error::Read { path: home.dir().display().to_string(), source })?;
        Ok(Spaces::new(Served::Home(home), config, true))
    }

    fn new(served: Served, config: Config, daemon: bool) -> (Arc<Spaces>, Requests) {
        let (sender, requests) = passes::channel(daemon);
        let home = match &served {
            Served::Root => None,
            Served::Home(home) => Some(home.clone()),
        };
        let keys = Keys::new(home, config.clone());
        let spaces = Arc::new_cyclic(|me| Spaces {
            served,
            config,
            me: me.clone(),
            open: Mutex::new(Vec::new()),
            opening: tokio::sync::Mutex::new(()),
            keys,
            models: Arc::default(),
            metrics: Arc::default(),
            passes: sender,
            watcher: Mutex::new(None),
            daemon,
            started: Instant::now(),
            started_at: clock::now(),
            summaries: Mutex::new(None),
            retired_held_searches: std::sync::atomic::AtomicU64::new(0),
            indexers: Mutex::new(tokio::task::JoinSet::new()),
        });
        (spaces, requests)
    }

    /// The home's configuration (a lone root's own).
    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The daemon's counters, for a worker that outlives a borrow (the HTTP listener).
    pub fn metrics_handle(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Whether this is a home (rather than a lone root).
    pub fn is_home(&self) -> bool {
        matches!(self.served, Served::Home(_))
    }

    /// The folder served: the root, or the home.
    pub fn dir(&self) -> &std::path::Path {
        match &self.served {
            Served::Root => &self.config.root,
            Served::Home(home) => home.dir(),
        }
    }

    /// When the daemon started.
    pub fn started(&self) -> (Instant, DateTime<Utc>) {
        (self.started, self.started_at)
    }

    /// A number that changes whenever the daemon serves a call, runs a pass or refreshes or
    /// settles an index, and stands still while it is idle.
    pub fn activity(&self) -> u64 {
        self.metrics.activity()
    }

    /// Who each token lets in, and the review page's sign-in codes.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Have new spaces watched by `watcher` (and the ones already open).
    pub fn watch_with(&self, watcher: WatchHandle) -> Result<(), super::watch::WatchError> {
        for open in lock(&self.open).iter() {
            watcher.add(&open.name, open.service.root_dir())?;
        }
        *lock(&self.watcher) = Some(watcher);
        Ok(())
    }

    // ---- spaces ---------------------------------------------------------------------------

    /// The names of the spaces: every space of a home, or the lone root's "".
    pub fn names(&self) -> Vec<String> {
        match &self.served {
            Served::Root => vec![String::new()],
            Served::Home(home) => home.names(),
        }
    }

    /// The configuration of space `name`: the home's, with the space's own file over it.
    pub fn config_of(&self, name: &str) -> Result<Config, Error> {
        match &self.served {
            Served::Root => Ok(self.config.clone()),
            Served::Home(home) => {
                let flags = Overrides {
                    home: Some(home.dir().to_path_buf()),
                    space: Some(name.to_string()),
                    ..Default::default()
                };
                Config::load(&flags)
                    .map_err(|e| Error::SpaceUnavailable { space: name.to_string(), message: e.to_string() })
            }
        }
    }

    /// The service of space `name`, opened if it is not open yet. `create`: a space a home does
    /// not have yet is made (when `spaces.auto_create` is on).
    pub async fn service(&self, name: &str, create: bool) -> Result<Arc<Service>, Error> {
        if let Some(service) = self.find_open(name) {
            return Ok(service);
        }
        let _one = self.opening.lock().await;
        if let Some(service) = self.find_open(name) {
            return Ok(service);
        }
        let Served::Home(home) = &self.served else {
            return Err(Error::NoSpace(name.to_string()));
        };
        let root = home.space(name).map_err(Error::BadInput)?;
        if !root.is_initialized() {
            if !(create && self.config.spaces.auto_create) {
                return Err(Error::NoSpace(name.to_string()));
            }
            self.create(name)?;
        }
        let unavailable = |message: String| Error::SpaceUnavailable { space: name.to_string(), message };
        let config = self.config_of(name)?;
        // A daemon serves the space alone; `memfold mcp` only reads a shared space.
        let serve_lock = match self.daemon {
            true => Some(
                LockGuard::try_acquire(&root.serve_lock(), "memfold serve").map_err(|e| unavailable(e.to_string()))?,
            ),
            false => None,
        };
        let memory = Memory::open_with(config, self.models.clone()).await.map_err(|e| unavailable(e.to_string()))?;
        let service = self.service_over(name.to_string(), memory);
        let stop_tx = self.start_space(&service, true);
        if let Some(watcher) = lock(&self.watcher).as_ref()
            && let Err(e) = watcher.add(name, root.dir())
        {
            tracing::warn!(space = name, error = %e, "cannot watch the space's files; searches catch up when it reopens");
        }
        tracing::info!(space = name, "space opened");
        let used = Instant::now();
        self.insert(Open { name: name.to_string(), service: service.clone(), used, _stop: stop_tx, _lock: serve_lock });
        Ok(service)
    }

    /// Make space `name` in the home (a root, with its token).
    pub fn create(&self, name: &str) -> Result<(), Error> {
        let Served::Home(home) = &self.served else { return Err(Error::NoSpace(name.to_string())) };
        let root = home.space(name).map_err(Error::BadInput)?;
        root.init().map_err(|source| Error::Read { path: root.dir().display().to_string(), source })?;
        self.keys.admit_new_space(name, &root)?;
        tracing::info!(space = name, "space made");
        Ok(())
    }

    /// In a daemon: have a space just opened hold its rows, catch up with what changed while
    /// it was closed, and index in the background until the returned sender is dropped.
    /// `on_request`: a home's space opened for a request, whose rows are read at once.
    fn start_space(&self, service: &Service, on_request: bool) -> watch::Sender<bool> {
        let (stop_tx, stop) = watch::channel(false);
        if self.daemon {
            service.mark_dirty();
            service.resume_spool();
            let mut indexers = lock(&self.indexers);
            if on_request {
                // The rows read now, not after a quiet second: the request that opened the
                // space is answered by lance, the ones after it from the held rows.
                let (memory, _) = service.indexing();
                indexers.spawn(async move { memory.hold_vectors_now().await });
            } else {
                // A lone root's daemon reads them in its warm-up, after the settle.
                service.hold_rows();
            }
            indexers.spawn(super::workers::indexer_worker(service.indexing(), stop));
        }
        stop_tx
    }

    /// Close every space and wait for their indexers (the daemon's shutdown).
    pub async fn close_all(&self) {
        lock(&self.open).clear();
        let mut indexers = std::mem::take(&mut *lock(&self.indexers));
        while indexers.join_next().await.is_some() {}
    }

    // ---- the daemon's own files -----------------------------------------------------------

    /// The serve lock of the root or the home: one daemon at a time.
    pub fn serve_lock(&self) -> Result<LockGuard, memfold_store::sys::lock::LockError> {
        let path = match &self.served {
            Served::Root => Root::new(&self.config.root).serve_lock(),
            Served::Home(home) => home.serve_lock(),
        };
        LockGuard::try_acquire(&path, "memfold serve")
    }

    /// Record where the daemon listens, or, with None, that it stopped ([`memfold_store::listening`]).
    pub fn announce(&self, addr: Option<std::net::SocketAddr>) {
        let file = match &self.served {
            Served::Root => Root::new(&self.config.root).listening_file(),
            Served::Home(home) => home.listening_file(),
        };
        match addr {
            Some(addr) => {
                if let Err(e) = memfold_store::listening::Listening::write_to(&file, addr) {
                    tracing::warn!(error = %e, "could not record where the daemon listens");
                }
            }
            None => memfold_store::listening::Listening::remove_from(&file),
        }
    }

    /// Log which files other accounts can read or change.
    pub fn warn_if_exposed(&self) {
        let dir = self.dir();
        let exposed = memfold_store::sys::access::exposed(dir);
        if !exposed.is_empty() {
            let files: Vec<String> = exposed.iter().map(|e| format!("{} ({:o})", e.path, e.mode)).collect();
            tracing::warn!(
                files = %files.join(", "),
                fix = %memfold_store::sys::access::fix_for(dir),
                "other accounts on this machine can read or change these memory files"
            );
        }
    }

    fn service_over(&self, name: String, memory: Memory) -> Arc<Service> {
        Service::new(name, memory, self.metrics.clone(), self.passes.clone(), self.me.clone(), self.started())
    }

    fn find_open(&self, name: &str) -> Option<Arc<Service>> {
        let mut open = lock(&self.open);
        let at = open.iter().position(|o| o.name == name)?;
        let mut space = open.remove(at);
        space.used = Instant::now();
        let service = space.service.clone();
        open.push(space); // most recently used last
        Some(service)
    }

    /// Add an open space, closing the least recently used idle ones past `spaces.max_open`.
    fn insert(&self, space: Open) {
        let closed: Vec<Open> = {
            let mut open = lock(&self.open);
            open.push(space);
            let mut closed = Vec::new();
            let mut at = 0;
            while open.len() > self.config.spaces.max_open.max(1) && at < open.len() - 1 {
                // Idle: nothing but this list holds its service.
                if Arc::strong_count(&open[at].service) == 1 {
                    closed.push(open.remove(at));
                } else {
                    at += 1;
                }
            }
            closed
        };
        self.retire(closed, "idle, past spaces.max_open");
    }

    /// Close the spaces of a home that nobody has used for `spaces.close_idle_secs` (and that
    /// nothing holds); how many closed.
    pub fn close_idle(&self) -> usize {
        let idle = Duration::from_secs(self.config.spaces.close_idle_secs);
        if !self.is_home() || idle.is_zero() {
            return 0;
        }
        let closed: Vec<Open> = {
            let mut open = lock(&self.open);
            let (idle, busy): (Vec<Open>, Vec<Open>) = std::mem::take(&mut *open)
                .into_iter()
                .partition(|o| o.used.elapsed() >= idle && Arc::strong_count(&o.service) == 1);
            *open = busy;
            idle
        };
        let n = closed.len();
        self.retire(closed, "unused for spaces.close_idle_secs");
        n
    }

    /// Forget closed spaces: count what their indices served, stop watching them.
    fn retire(&self, closed: Vec<Open>, why: &str) {
        for space in closed {
            self.retired_held_searches.fetch_add(space.service.held_searches(), std::sync::atomic::Ordering::Relaxed);
            if let Some(watcher) = lock(&self.watcher).as_ref() {
                watcher.remove(&space.name);
            }
            tracing::info!(space = %space.name, why, "space closed");
        }
    }

    /// The service of space `name` if it is open (without opening it or counting a use).
    pub fn open_service(&self, name: &str) -> Option<Arc<Service>> {
        lock(&self.open).iter().find(|o| o.name == name).map(|o| o.service.clone())
    }

    /// The open services, most recently used last.
    pub fn open_services(&self) -> Vec<Arc<Service>> {
        lock(&self.open).iter().map(|o| o.service.clone()).collect()
    }

    /// Every space with its counts (blocking reads of each space's files).
    pub async fn summaries(&self) -> Vec<SpaceSummary> {
        let Some(me) = self.me.upgrade() else { return Vec::new() };
        let open: Vec<String> = lock(&self.open).iter().map(|o| o.name.clone()).collect();
        memfold_store::sys::blocking(move || {
            let now = clock::now();
            me.names().into_iter().map(|name| summary(&me, &name, open.contains(&name), now)).collect()
        })
        .await
    }

    /// How long ago the daemon started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The Prometheus text of every counter, with the gauges read from the files now: a lone
    /// root's, or a home's summed over its spaces with the largest ones by name (read at most
    /// every [`METRICS_FRESH`], a home's spaces being many).
    pub async fn metrics_text(&self) -> String {
        let mut gauges = Gauges { uptime: self.uptime(), ..Gauges::default() };
        let open = self.open_services();
        // A counter: the spaces closed so far keep counting in it.
        let retired = self.retired_held_searches.load(std::sync::atomic::Ordering::Relaxed);
        gauges.held_searches = Some(retired + open.iter().map(|s| s.held_searches()).sum::<u64>());
        if !self.is_home()
            && let Some(service) = open.first()
        {
            let status = service.gauges().await;
            gauges.pending_facts = status.as_ref().map(|s| s.pending_facts);
            gauges.entries = status.as_ref().map(|s| s.entries);
            gauges.memory_tokens = status.as_ref().map(|s| s.memory_tokens);
            gauges.curation = status.and_then(|s| s.curation);
        }
        if self.is_home() {
            let summaries = self.summaries_cached().await;
            gauges.pending_facts = Some(summaries.iter().map(|s| s.pending_facts).sum());
            gauges.entries = Some(summaries.iter().map(|s| s.entries).sum());
            let mut top: Vec<(String, usize, usize)> =
                summaries.iter().map(|s| (s.name.clone(), s.entries, s.pending_facts)).collect();
            top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            top.truncate(self.config.spaces.metrics_top);
            gauges.spaces = Some(SpaceGauges { all: summaries.len(), open: open.len(), top });
        }
        self.metrics.render(gauges)
    }

    async fn summaries_cached(&self) -> Vec<SpaceSummary> {
        if let Some((at, summaries)) = lock(&self.summaries).as_ref()
            && at.elapsed() < METRICS_FRESH
        {
            return summaries.clone();
        }
        let summaries = self.summaries().await;
        *lock(&self.summaries) = Some((Instant::now(), summaries.clone()));
        summaries
    }
}

/// How long a home's per-space gauges are reused by `/metrics` before they are read again.
pub const METRICS_FRESH: Duration = Duration::from_secs(30);

/// One space's counts, read from its files.
fn summary(spaces: &Spaces, name: &str, open: bool, now: DateTime<Utc>) -> SpaceSummary {
    let config = spaces.config_of(name).ok();
    let root = config.as_ref().map(|c| Root::new(&c.root)).unwrap_or_else(|| Root::new(spaces.dir()));
    let status = config.as_ref().and_then(|c| memfold_core::memory::status::status(&root, c, now).ok());
    let modified = |path: std::path::PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let newest_day = std::fs::read_dir(root.archive_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().and_then(|m| m.modified()).ok())
        .max();
    let last_use = [newest_day, modified(root.memory()), modified(root.recall())]
        .into_iter()
        .flatten()
        .max()
        .map(DateTime::<Utc>::from);
    SpaceSummary {
        name: name.to_string(),
        entries: status.as_ref().map_or(0, |s| s.entries),
        pending_facts: status.as_ref().map_or(0, |s| s.pending_facts),
        last_pass: status.as_ref().and_then(|s| s.last_run.as_ref()).map(|r| r.finished),
        disk_bytes: memfold_store::tree_bytes(root.dir()),
        last_use,
        shared: spaces.config.spaces.shared.iter().any(|s| s == name),
        open,
    }
}
