//! The MCP door: one tool per verb of the [`Service`], and `MEMORY.md` and `memory.md` as resources.
//!
//! Two transports serve the same [`McpServer`]: `memfold mcp` speaks MCP on stdin/stdout
//! ([`serve_stdio`]; stdout carries nothing but protocol, logs go to stderr), and
//! `memfold serve` mounts streamable HTTP at `/mcp` ([`McpDoors`]: one server per space, the
//! space the bearer token decides, behind the API's guard). Either way the tools call the
//! space's service, as the HTTP routes do: facts go through its ingest, passes through its
//! scheduler, and every call is counted in the daemon's metrics. A server names its space,
//! never takes one from a tool's arguments, and looks the space's service up at each call, so
//! a space closed while idle opens again for the next one. The tools are in [`tools`], their
//! text in [`crate::doors::render`].
//!
//! **Resources.** `memfold://MEMORY.md` (the always-in-prompt memory) and
//! `memfold://memory.md` (`consolidated/memory.md`, every current entry). When either file's
//! content changes, clients hear `notifications/resources/updated` through both mechanisms:
//! the `resources/subscribe` of protocol versions up to 2025-11-25 (kept per session, dropped
//! when the session ends or a notification cannot be sent) and the `subscriptions/listen`
//! stream of 2026-07-28. The changes come from [`Memory::subscribe`]: this process's own
//! writes, and what a file watcher saw (another process's pass, a hand edit), reported through
//! [`Memory::files_changed`] by the daemon's watcher or, for `memfold mcp`, by one of its own.
//! [`McpServer::follow`] compares each file's content hash with the last one told, so a
//! change reported twice (by the writer and the watcher) is told once.

mod tools;

use memfold_store::sys::guard as lock;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CacheScope, Implementation, ListResourcesResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource, ResourceContents,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt, tool_handler};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::service::watch::WatchError;
use crate::service::{Service, Spaces};
use memfold_core::error::Error;
use memfold_core::memory::{Memory, Rewritten};

/// A file served as a resource.
#[derive(Debug)]
struct Served {
    uri: &'static str,
    name: &'static str,
    description: &'static str,
    /// The file, as [`Memory::subscribe`] reports its changes.
    changed_by: Rewritten,
}

const SERVED: [Served; 2] = [
    Served {
        uri: "memfold://MEMORY.md",
        name: "MEMORY.md",
        description: "The always-in-prompt memory: the few highest-value facts, one line each, rewritten after \
                      every consolidation pass",
        changed_by: Rewritten::Promoted,
    },
    Served {
        uri: "memfold://memory.md",
        name: "memory.md",
        description: "consolidated/memory.md: every current entry of long-term memory, one block each with a \
                      metadata comment",
        changed_by: Rewritten::Memory,
    },
];

fn served(uri: &str) -> Option<&'static Served> {
    SERVED.iter().find(|s| s.uri == uri)
}

const INSTRUCTIONS: &str = "memfold is the user's long-term memory, kept as markdown. Search it \
    (memory_search) before answering from what you know about the user; store durable facts with \
    memory_add, one self-contained sentence each; memory_forget removes what is wrong or unwanted. \
    The resource memfold://MEMORY.md holds the few facts worth having in every prompt. Consolidation \
    runs in the background; every run can be listed (memory_runs) and undone (memory_undo).";

/// The MCP server of one space. Clones share the space's state; [`McpServer::session`] makes
/// the handler of one client session.
#[derive(Clone)]
pub struct McpServer {
    spaces: Arc<Spaces>,
    /// The space it serves ("" for a lone root).
    space: String,
    shared: Arc<Shared>,
    /// The legacy resource subscriptions of this session.
    session: Arc<Mutex<Session>>,
}

/// What every session shares.
struct Shared {
    tools: ToolRouter<McpServer>,
    /// Sessions that sent `resources/subscribe`.
    subscribers: Mutex<Vec<Subscriber>>,
    next_subscriber: AtomicU64,
    /// URIs of resources that changed, for `subscriptions/listen` streams.
    changed: broadcast::Sender<&'static str>,
}

#[derive(Default)]
struct Session {
    uris: BTreeSet<&'static str>,
    /// Whether the session is in [`Shared::subscribers`].
    subscriber: Option<u64>,
}

struct Subscriber {
    id: u64,
    peer: Peer<RoleServer>,
    /// Gone when the session ends.
    session: Weak<Mutex<Session>>,
}

impl McpServer {
    /// The MCP server of space `space` of `spaces`.
    pub fn new(spaces: Arc<Spaces>, space: &str) -> McpServer {
        let shared = Shared {
            tools: McpServer::tool_router(),
            subscribers: Mutex::default(),
            next_subscriber: AtomicU64::new(1),
            changed: broadcast::channel(16).0,
        };
        McpServer { spaces, space: space.to_string(), shared: Arc::new(shared), session: Arc::default() }
    }

    /// The space's service (opened if it was closed while idle), errors naming the space.
    async fn service(&self) -> Result<Arc<Service>, Error> {
        self.spaces.service(&self.space, false).await
    }

    /// The handler of a new client session: the same root, no subscriptions yet.
    pub fn session(&self) -> McpServer {
        McpServer { session: Arc::default(), ..self.clone() }
    }

    /// Tell subscribers when a served file's content changes, as the space's service reports
    /// it ([`Memory::subscribe`]). Runs as long as the server does; when the space closes (idle)
    /// it follows the space again once it is open.
    pub async fn follow(&self) {
        let mut told: Vec<Option<String>> = Vec::with_capacity(SERVED.len());
        for s in &SERVED {
            told.push(self.hash(s).await);
        }
        loop {
            let Some(service) = self.spaces.open_service(&self.space) else {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            };
            let mut rewritten = service.subscribe();
            drop(service);
            loop {
                let which: Vec<usize> = match rewritten.recv().await {
                    Ok(what) => (0..SERVED.len()).filter(|&i| SERVED[i].changed_by == what).collect(),
                    Err(broadcast::error::RecvError::Lagged(_)) => (0..SERVED.len()).collect(),
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                for i in which {
                    let hash = self.hash(&SERVED[i]).await;
                    if hash != told[i] {
                        told[i] = hash;
                        self.notify(SERVED[i].uri).await;
                    }
                }
            }
        }
    }

    /// A served file's content hash (None when it cannot be read).
    async fn hash(&self, served: &Served) -> Option<String> {
        let text = self.service().await.ok()?.file_text(served.changed_by).await.ok()?;
        Some(memfold_core::memory::text::content_hash(text))
    }

    /// Send `resources/updated` for `uri` to its listeners and legacy subscribers.
    async fn notify(&self, uri: &'static str) {
        let _ = self.shared.changed.send(uri);
        let peers: Vec<(u64, Peer<RoleServer>)> = {
            let mut subscribers = lock(&self.shared.subscribers);
            subscribers.retain(|s| s.session.strong_count() > 0);
            subscribers
                .iter()
                .filter(|s| s.session.upgrade().is_some_and(|session| lock(&session).uris.contains(uri)))
                .map(|s| (s.id, s.peer.clone()))
                .collect()
        };
        for (id, peer) in peers {
            if let Err(e) = peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await {
                tracing::debug!(error = %e, "resources/updated not delivered; dropping the subscriber");
                let gone = {
                    let mut subscribers = lock(&self.shared.subscribers);
                    let at = subscribers.iter().position(|s| s.id == id);
                    at.map(|at| subscribers.remove(at).session)
                };
                // A session still alive registers again on its next `resources/subscribe`.
                if let Some(session) = gone.and_then(|session| session.upgrade()) {
                    lock(&session).subscriber = None;
                }
            }
        }
    }
}

#[tool_handler(router = self.shared.tools)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities =
            ServerCapabilities::builder().enable_tools().enable_resources().enable_resources_subscribe().build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("memfold", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = SERVED
            .iter()
            .map(|s| Resource::new(s.uri, s.name).with_description(s.description).with_mime_type("text/markdown"))
            .collect();
        let list = ListResourcesResult::with_all_items(resources);
        Ok(if caches(&context) { list.with_ttl_ms(0).with_cache_scope(CacheScope::Public) } else { list })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let served = known(&request.uri)?;
        let text = match async { self.service().await?.file_text(served.changed_by).await }.await {
            Ok(text) => text,
            Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
        };
        // The agent's model reads it: every secret masked.
        let text = memfold_core::memory::text::mask(&text);
        let read =
            ReadResourceResult::new(vec![ResourceContents::text(text, served.uri).with_mime_type("text/markdown")]);
        // The files change at any time, and memory is the user's own.
        Ok(if caches(&context) { read.with_ttl_ms(0).with_cache_scope(CacheScope::Private) } else { read }.into())
    }

    #[allow(deprecated)] // `resources/subscribe`: replaced by `subscriptions/listen` in 2026-07-28
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let served = known(&request.uri)?;
        // The session's lock is not held while taking the subscribers' ([`McpServer::notify`]
        // takes them the other way round).
        let id = {
            let mut session = lock(&self.session);
            session.uris.insert(served.uri);
            if session.subscriber.is_some() {
                return Ok(());
            }
            let id = self.shared.next_subscriber.fetch_add(1, Ordering::Relaxed);
            session.subscriber = Some(id);
            id
        };
        let subscriber = Subscriber { id, peer: context.peer.clone(), session: Arc::downgrade(&self.session) };
        lock(&self.shared.subscribers).push(subscriber);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let served = known(&request.uri)?;
        lock(&self.session).uris.remove(served.uri);
        Ok(())
    }

    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // The SDK keeps what was also requested.
        Some(SubscriptionFilter::builder().resource_subscriptions(SERVED.iter().map(|s| s.uri)).build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let wanted = context.accepted().resource_subscriptions.clone().unwrap_or_default();
        let mut changes = self.shared.changed.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.recv() => match changed {
                    Ok(uri) if wanted.iter().any(|w| w == uri) => context
                        .sink()
                        .notify_resource_updated(uri)
                        .await
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        for uri in &wanted {
                            context.sink().notify_resource_updated(uri.clone()).await
                                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

/// Whether the client speaks a protocol version (2026-07-28 on) whose results carry cache hints.
fn caches(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// The served file `uri` names, or the error a client gets for an unknown URI.
fn known(uri: &str) -> Result<&'static Served, McpError> {
    served(uri).ok_or_else(|| {
        let names: Vec<&str> = SERVED.iter().map(|s| s.uri).collect();
        McpError::resource_not_found(format!("no resource {uri}; memfold serves {}", names.join(" and ")), None)
    })
}

/// Why `memfold mcp` stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpServeError {
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error("starting the MCP session on stdin/stdout: {0}")]
    Start(String),
    #[error("the MCP session on stdin/stdout failed: {0}")]
    Session(String),
    #[error("worker {name} failed: {message}")]
    Worker { name: &'static str, message: String },
}

/// Serve MCP on stdin/stdout until the client closes stdin (`memfold mcp`). The service's
/// scheduler runs the passes a tool asks for (no interval ticks: that is the daemon's job). A
/// watcher on the root marks the index stale when another process or a person changes the files
/// (so searches see it) and feeds `resources/updated`; the trimmer runs as in the daemon.
pub async fn serve_stdio(memory: Memory) -> Result<(), McpServeError> {
    let name = memory.config().space.clone().unwrap_or_default();
    let (spaces, requests) = Spaces::space(memory);
    let mut runtime = crate::service::workers::Runtime::start(spaces.clone(), requests)?;
    for service in spaces.open_services() {
        service.hold_rows();
    }
    let server = McpServer::new(spaces.clone(), &name);
    let running = server
        .session()
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| McpServeError::Start(e.to_string()))?;
    let result = tokio::select! {
        ended = running.waiting() => ended.map(|_| ()).map_err(|e| McpServeError::Session(e.to_string())),
        () = server.follow() => Ok(()),
        (name, ended) = runtime.next_ended() => {
            let message = ended.err().unwrap_or_else(|| "stopped on its own".into());
            tracing::error!(worker = name, error = %message, "worker ended; the MCP server stops");
            Err(McpServeError::Worker { name, message })
        }
    };
    runtime.shutdown(std::future::pending()).await;
    spaces.close_all().await;
    result
}

/// The MCP servers of a daemon's spaces at `/mcp`: one streamable-HTTP service per space that
/// used it, made on first use, with its own sessions (a session opened in one space is unknown
/// to every other). At most `server.max_mcp_sessions` sessions per space.
pub struct McpDoors {
    spaces: Arc<Spaces>,
    hosts: Vec<String>,
    max_body: usize,
    max_sessions: usize,
    stop: CancellationToken,
    by_space: Mutex<std::collections::HashMap<String, McpDoor>>,
}

#[derive(Clone)]
struct McpDoor {
    http: StreamableHttpService<McpServer, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
}

impl McpDoors {
    /// Answering only to `hosts` (names, any port: the guard in front checks the ports),
    /// refusing bodies over `max_body` bytes, closing every session and stream when `stop` is
    /// cancelled.
    pub fn new(
        spaces: Arc<Spaces>,
        hosts: Vec<String>,
        max_body: usize,
        max_sessions: usize,
        stop: CancellationToken,
    ) -> McpDoors {
        McpDoors { spaces, hosts, max_body, max_sessions, stop, by_space: Mutex::default() }
    }

    /// Serve `request` with the MCP server of `space`.
    pub async fn serve(&self, space: &str, request: axum::extract::Request) -> axum::response::Response {
        use axum::response::IntoResponse;
        use tower::ServiceExt;
        let door = self.door(space);
        let opens = request.method() == axum::http::Method::POST && !request.headers().contains_key("mcp-session-id");
        if opens && door.sessions.sessions.read().await.len() >= self.max_sessions {
            let message = format!(
                "{} MCP sessions are open (server.max_mcp_sessions); close one or try again later",
                self.max_sessions
            );
            let body = serde_json::json!({"error": {"code": "too_many_sessions", "message": message}});
            return (axum::http::StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
        }
        match door.http.oneshot(request).await {
            Ok(response) => response.map(axum::body::Body::new),
            Err(never) => match never {},
        }
    }

    fn door(&self, space: &str) -> McpDoor {
        let mut doors = lock(&self.by_space);
        if let Some(door) = doors.get(space) {
            return door.clone();
        }
        let server = McpServer::new(self.spaces.clone(), space);
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.hosts.clone())
            .with_max_request_body_bytes(self.max_body)
            .with_cancellation_token(self.stop.clone());
        let sessions = Arc::new(LocalSessionManager::default());
        let session = server.clone();
        let http = StreamableHttpService::new(move || Ok(session.session()), sessions.clone(), config);
        let follower = server.clone();
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = follower.follow() => {}
                () = stop.cancelled() => {}
            }
        });
        let door = McpDoor { http, sessions };
        doors.insert(space.to_string(), door.clone());
        door
    }
}
