//! The HTTP API (docs/http.md): axum routes whose handlers parse, call the library and answer JSON.
//!
//! Bodies mirror the CLI's `--json` output. Every error is
//! `{"error":{"code","message"}}` (plus `ids` when a 409 can name what is in the way) with a
//! fitting status: 400 bad input, 401 missing or wrong bearer token, 403 a request a browser
//! sent for another site, 404 unknown id or route, 405 wrong method, 408 a body slower than
//! `server.body_timeout_secs`, 409 consolidation lock held, a stale write or a refused
//! undo/apply, 413 body larger than `server.max_body_bytes` or a fact longer than
//! `ingest.max_fact_bytes` (nothing of the request is stored), 415 a body not sent as
//! `application/json`, 421 a Host the server does not answer to, 502 an unusable LLM reply,
//! 503 no LLM configured, the LLM or embedder unreachable, the daemon shutting down, or
//! `server.max_mcp_sessions` MCP sessions open.
//! Every request first passes the [`Guard`] (Host allowlist, no cross-site browser requests),
//! then, but for `GET /healthz`, the bearer token, as soon as its head is read: **the token
//! decides the space** ([`crate::service::access::Keys::access`]). A space's token reaches its own
//! space's routes and nothing else (403 for a path under `/spaces/`); a home's operator token
//! names the space in the path, `/spaces/<name>/<route>`, and alone may list the spaces
//! (`GET /spaces`) and read the home's `/metrics`. A lone root's token is its
//! `.memfold/token` (or `server.token_env`'s). A 5xx from a space names the space. A request body,
//! where a route takes one, must be sent with `Content-Type: application/json` unless it is
//! empty (an empty body means `{}`). Connections are accepted by [`listen`] (header
//! timeout, connection cap).
//!
//! `POST/GET/DELETE /mcp` is the MCP server ([`crate::doors::mcp`]) over streamable HTTP, one
//! per space, behind the same guard and token; it answers in MCP's terms (JSON-RPC), not with
//! the error bodies above, except for what the guard and the token check refuse first.
//!
//! Handlers parse, call one [`Service`] method and render; the status of every error comes from
//! its [`Kind`] in one place ([`ApiError::from`]). Consolidation never runs in a handler:
//! `POST /consolidate` asks the scheduler (through the service) and waits up to
//! `server.request_timeout_secs` for the report, then answers 202 with the request id whose
//! progress `GET /status` shows.

mod guard;
mod listen;
pub mod openapi;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::doors::mcp::McpDoors;
use crate::service::workers::stopped;
use crate::service::{Access, Door, PassAnswer, Service, Spaces};
use guard::Guard;
use listen::Limits;
use memfold_core::error::{Error, Kind};
use memfold_core::memory::views::PassOptions;
use memfold_core::memory::{RecallRequest, SweepOptions, TurnRequest, requests};

/// How long open requests may take to finish after shutdown starts.
pub const HTTP_DRAIN: Duration = Duration::from_secs(10);

/// The state every handler gets: the spaces, the MCP servers of the spaces that used `/mcp`,
/// and how long a body may take to arrive.
#[derive(Clone)]
struct Api {
    spaces: Arc<Spaces>,
    mcp: Arc<McpDoors>,
    body_timeout: Duration,
}

type Shared = State<Api>;
type ApiResult = Result<Response, ApiError>;

const DOOR: Door = Door::Http;

/// A bound listener and how many connections it serves at once.
pub struct Listener {
    pub listener: tokio::net::TcpListener,
    /// The address actually bound.
    pub addr: SocketAddr,
    pub max_connections: usize,
}

/// The space a request is for, as the token (and for the operator, the path) decided it.
#[derive(Debug, Clone)]
struct Resolved {
    space: String,
    /// A write that may make the space (`spaces.auto_create`): facts and turns.
    creates: bool,
}

/// The service of the request's space, opened if it is not open yet.
struct Space(Arc<Service>);

impl FromRequestParts<Api> for Space {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &Api) -> Result<Self, ApiError> {
        let resolved = parts.extensions.get::<Resolved>().cloned().ok_or_else(|| {
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", "the home's token names a space: /spaces/<name>/<route>")
        })?;
        Ok(Space(state.spaces.service(&resolved.space, resolved.creates).await?))
    }
}

/// Serve the API on `http` until `stop` says so, letting open requests finish for at most
/// [`HTTP_DRAIN`]: the `http` worker of [`crate::doors::daemon`].
pub async fn serve(spaces: Arc<Spaces>, http: Listener, stop: watch::Receiver<bool>) -> Result<(), String> {
    let server = &spaces.config().server;
    let limits = Limits {
        header_timeout: Duration::from_secs(server.header_timeout_secs),
        max_connections: http.max_connections,
        drain: HTTP_DRAIN,
    };
    // Cancelled on shutdown: MCP streams stay open otherwise and would hold the drain.
    let mcp_stop = CancellationToken::new();
    let metrics = spaces.metrics_handle();
    let app = app(spaces, http.addr, mcp_stop.clone());
    let mut cancel = stop.clone();
    tokio::select! {
        () = listen::serve(http.listener, app, limits, metrics, stop) => Ok(()),
        () = async { stopped(&mut cancel).await; mcp_stop.cancel(); std::future::pending().await } => Ok(()),
    }
}

/// The whole server over `spaces` listening on `bound`: the guard and the token's space in
/// front of the routes (they run before routing, so the operator's `/spaces/<name>/` prefix
/// can be taken off), with MCP served at `/mcp` until `mcp_stop` is cancelled.
fn app(spaces: Arc<Spaces>, bound: SocketAddr, mcp_stop: CancellationToken) -> App {
    let server = spaces.config().server.clone();
    let guard = Arc::new(Guard::new(&server.bind, bound, &server.allowed_hosts));
    let mcp = Arc::new(McpDoors::new(
        spaces.clone(),
        guard.names(),
        server.max_body_bytes,
        server.max_mcp_sessions,
        mcp_stop,
    ));
    let state = Api { spaces, mcp, body_timeout: Duration::from_secs(server.body_timeout_secs) };
    let routes = router(state.clone(), bound);
    let stack = tower::ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(state.clone(), count_responses))
        .layer(middleware::from_fn_with_state(guard, guard_requests))
        .layer(middleware::from_fn_with_state(state, resolve_space))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .service(routes);
    tower::util::BoxCloneSyncService::new(stack)
}

/// A request whose handler panicked: a 500 naming the panic (the space named by
/// [`resolve_space`]), and the connection and the daemon go on.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = memfold_store::sys::panic_message(&*panic);
    tracing::error!(panic = what, "a request panicked");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("memfold failed inside the request: {what}"))
        .into_response()
}

/// The service the listener runs: the routes behind the middleware that runs before routing.
pub type App = tower::util::BoxCloneSyncService<Request, Response, std::convert::Infallible>;

/// The routes of the HTTP API, for a server listening on `bound`.
fn router(state: Api, bound: SocketAddr) -> Router {
    let server = &state.spaces.config().server;
    let max_body = server.max_body_bytes;
    let body_timeout = state.body_timeout;
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi_document))
        .route("/facts", post(post_facts))
        .route("/turns", post(post_turns))
        .route("/turns/spooled", post(drain_spool))
        .route("/search", get(search))
        .route("/recall", post(recall))
        .route("/consolidate", post(consolidate))
        .route("/status", get(status))
        .route("/entries", get(entries))
        .route("/entries/{id}", get(entry).delete(delete_entry))
        .route("/entries/{id}/history", get(entry_history))
        .route("/about", get(about))
        .route("/entries/{id}/pin", post(pin_entry))
        .route("/entries/{id}/unpin", post(unpin_entry))
        .route("/entries/{id}/share", post(share_entry))
        .route("/entries/{id}/merge", post(merge_entries))
        .route("/entries/{id}/supersede", post(supersede_entry))
        .route("/facts/{id}", get(fact))
        .route("/reindex", post(reindex))
        .route("/sweep", post(sweep))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/runs/{id}/undo", post(undo_run))
        .route("/plans", get(plans))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/apply", post(apply_plan))
        .route("/plans/{id}/reject", post(reject_plan))
        .route("/metrics", get(metrics))
        .route("/spaces", get(list_spaces))
        .route("/mcp", axum::routing::any(mcp))
        .nest_service("/ui", crate::doors::web::router(state.spaces.clone(), bound.port()))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this route")
        })
        .layer(DefaultBodyLimit::max(max_body))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .with_state(state)
}

/// A JSON error body with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// The entries, facts or runs in the way of a 409, when known.
    ids: Vec<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), ids: Vec::new() }
    }

    fn with_ids(mut self, ids: Vec<String>) -> ApiError {
        self.ids = ids;
        self
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

/// The one mapping from a kind of failure to an HTTP status.
pub fn status_of(kind: Kind) -> StatusCode {
    match kind {
        Kind::BadInput => StatusCode::BAD_REQUEST,
        Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Kind::NotFound => StatusCode::NOT_FOUND,
        Kind::Conflict | Kind::Stale | Kind::Busy => StatusCode::CONFLICT,
        Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Kind::BadGateway => StatusCode::BAD_GATEWAY,
        Kind::Forbidden => StatusCode::FORBIDDEN,
        Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let status = status_of(e.kind());
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %e, "request failed");
        }
        let ids = e.ids().to_vec();
        ApiError::new(status, e.code(), e.to_string()).with_ids(ids)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if !self.ids.is_empty() {
            body["error"]["ids"] = json!(self.ids);
        }
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A JSON body with JSON errors: 413 past the body limit, 415 unless it is sent as
/// `application/json`, 400 for anything unparseable. An empty (or all-whitespace) body is
/// `{}` whatever its type, so `curl -X POST …/consolidate` needs no header.
///
/// Requiring the type keeps web pages out: a browser sends `text/plain` from any page
/// without asking the server first, but `application/json` only after a CORS preflight,
/// which this server never grants.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Api> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Api) -> Result<Self, ApiError> {
        let content_type = req.headers().get(header::CONTENT_TYPE).cloned();
        let slow = || {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the request body did not arrive within server.body_timeout_secs ({}s); nothing was stored",
                    state.body_timeout.as_secs()
                ),
            )
        };
        let read = tokio::time::timeout(state.body_timeout, Bytes::from_request(req, state)).await;
        let bytes = read.map_err(|_| slow())?.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", rejection.body_text())
            } else if std::error::Error::source(&rejection).is_some_and(is_timeout) {
                slow()
            } else {
                ApiError::bad_request(rejection.body_text())
            }
        })?;
        let blank = bytes.iter().all(u8::is_ascii_whitespace);
        if !blank && !is_json(content_type.as_ref()) {
            let given = match &content_type {
                Some(value) => format!("got Content-Type: {}", String::from_utf8_lossy(value.as_bytes())),
                None => "no Content-Type was given".to_string(),
            };
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("the request body must be JSON sent with Content-Type: application/json ({given})"),
            ));
        }
        let text: &[u8] = if blank { b"{}" } else { &bytes };
        serde_json::from_slice(text).map(JsonBody).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
    }
}

/// Whether a body read failed because [`RequestBodyTimeoutLayer`] gave up waiting.
fn is_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(error);
    while let Some(e) = at {
        if e.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        at = e.source();
    }
    false
}

/// Whether a Content-Type is `application/json` (parameters such as `charset` allowed).
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

fn ok(value: Value) -> ApiResult {
    Ok(Json(value).into_response())
}

/// Refuse what [`Guard::check`] refuses: 421 for a Host the server does not answer to,
/// 403 for a request a browser sent for another site.
async fn guard_requests(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.check(request.method(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!(method = %request.method(), path = request.uri().path(), %refusal, "request refused");
            let (status, code) = if refusal.misdirected() {
                (StatusCode::MISDIRECTED_REQUEST, "host_not_allowed")
            } else {
                (StatusCode::FORBIDDEN, "cross_site")
            };
            ApiError::new(status, code, refusal.to_string()).into_response()
        }
    }
}

/// Every request but `GET /healthz`, `GET /openapi.json` and the review page's (which signs
/// browsers in itself) needs a bearer token, checked once the head is read and before any
/// body; the token decides the request's space ([`Resolved`]). A space's token may not name a
/// space in the path; the operator's must (`/spaces/<name>/<route>`, the prefix taken off
/// before routing), but for the home's own routes (`/spaces`, `/metrics`). A 5xx answer from a
/// space names it.
async fn resolve_space(State(state): Shared, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if path == "/healthz" || path == "/openapi.json" || path == "/ui" || path.starts_with("/ui/") {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .map(str::to_string);
    let Some(access) = state.spaces.keys().access(given.as_deref()) else {
        let message = match given {
            None => "this server requires Authorization: Bearer <token>",
            Some(_) => "wrong bearer token",
        };
        return ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    };
    let named = path.strip_prefix("/spaces/").filter(|rest| !rest.is_empty());
    let space = match (access, named) {
        (Access::Space(_), Some(_)) => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a space's token reaches its own space only: paths under /spaces/ are the home token's",
            )
            .into_response();
        }
        (Access::Space(_), None) if path == "/spaces" || (path == "/metrics" && state.spaces.is_home()) => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "only the home's token lists the spaces or reads the home's metrics",
            )
            .into_response();
        }
        (Access::Space(own), None) => Some(own),
        (Access::Operator, Some(rest)) => {
            let (name, route) = rest.split_once('/').map_or((rest, ""), |(n, r)| (n, r));
            let query = request.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
            match format!("/{route}{query}").parse::<axum::http::Uri>() {
                Ok(uri) => *request.uri_mut() = uri,
                Err(_) => return ApiError::bad_request("a path that is not one").into_response(),
            }
            Some(name.to_string())
        }
        (Access::Operator, None) if path == "/spaces" || path == "/metrics" => None,
        (Access::Operator, None) => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the home's token names a space: /spaces/<name>/<route>",
            )
            .into_response();
        }
    };
    let Some(space) = space else { return next.run(request).await };
    let creates = request.method() == axum::http::Method::POST && matches!(request.uri().path(), "/facts" | "/turns");
    request.extensions_mut().insert(Resolved { space: space.clone(), creates });
    let response = next.run(request).await;
    if response.status().is_server_error() && !space.is_empty() {
        return name_the_space(response, &space).await;
    }
    response
}

/// A 5xx error body with the space named in its message.
async fn name_the_space(response: Response, space: &str) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let mut value: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(_) => return Response::from_parts(parts, axum::body::Body::from(bytes)),
    };
    if let Some(message) = value["error"]["message"].as_str().filter(|m| !m.starts_with("space ")) {
        value["error"]["message"] = json!(format!("space {space}: {message}"));
    }
    let mut response = Response::from_parts(parts, axum::body::Body::from(value.to_string()));
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

async fn count_responses(State(state): Shared, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    state.spaces.metrics().response(response.status().as_u16());
    response
}

async fn healthz() -> Json<Value> {
    Json(json!({"ok": true, "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /openapi.json`: the API described from the request types the handlers take.
async fn openapi_document() -> Json<Value> {
    Json(openapi::document())
}

// ---- ingest ----------------------------------------------------------------------------------

async fn post_facts(Space(service): Space, JsonBody(body): JsonBody<requests::Add>) -> ApiResult {
    ok(json!(service.add(DOOR, body.facts()).await?))
}

async fn post_turns(Space(service): Space, JsonBody(body): JsonBody<TurnRequest>) -> ApiResult {
    ok(json!(service.add_turn(DOOR, body.try_into()?).await?))
}

/// The agent hooks spooled a turn: extract the spool in the background (202 at once).
async fn drain_spool(Space(service): Space) -> ApiResult {
    let waiting = service.drain_spool(DOOR).await?;
    Ok((axum::http::StatusCode::ACCEPTED, axum::Json(json!({ "waiting": waiting }))).into_response())
}

// ---- search ----------------------------------------------------------------------------------

async fn search(Space(service): Space, params: Result<Query<requests::Search>, QueryRejection>) -> ApiResult {
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (query, request) = params.split();
    let hits = service.search(DOOR, &query, &request).await?;
    ok(json!({ "hits": hits }))
}

async fn recall(Space(service): Space, JsonBody(body): JsonBody<requests::Recall>) -> ApiResult {
    let request = RecallRequest { session: body.session(), budget: body.budget };
    ok(json!(service.recall(DOOR, &body.prompt, &request).await?))
}

// ---- consolidation -----------------------------------------------------------------------------

async fn consolidate(Space(service): Space, JsonBody(body): JsonBody<requests::Consolidate>) -> ApiResult {
    let opts = PassOptions { force: body.force, dry_run: body.dry_run };
    match service.consolidate(DOOR, opts).await? {
        PassAnswer::Done(report) => ok(json!(report)),
        PassAnswer::Running(running) => Ok((StatusCode::ACCEPTED, Json(json!(running))).into_response()),
    }
}

async fn status(Space(service): Space) -> ApiResult {
    ok(json!(service.status(DOOR).await?))
}

async fn reindex(Space(service): Space, JsonBody(body): JsonBody<requests::Reindex>) -> ApiResult {
    ok(json!(service.reindex(DOOR, body.clear).await?))
}

// ---- entries -----------------------------------------------------------------------------------

async fn entries(Space(service): Space) -> ApiResult {
    ok(json!({"entries": service.entries(DOOR).await?}))
}

async fn entry(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.entry(DOOR, &id).await?))
}

async fn delete_entry(
    Space(service): Space,
    Path(id): Path<String>,
    params: Result<Query<Map<String, Value>>, QueryRejection>,
) -> ApiResult {
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let forget: requests::Forget = targeted("id", id, params)?;
    ok(json!(service.forget(DOOR, &forget.id, forget.reason.as_deref()).await?))
}

async fn pin_entry(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.pin(DOOR, &id, true).await?))
}

async fn unpin_entry(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.pin(DOOR, &id, false).await?))
}

async fn fact(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.fact(DOOR, &id).await?))
}

/// `GET /about?name=&history=`: the entries about a name; without one, the names.
async fn about(Space(service): Space, params: Result<Query<requests::About>, QueryRejection>) -> ApiResult {
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    ok(json!(service.about(DOOR, params.name.as_deref(), params.history).await?))
}

async fn entry_history(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.history(DOOR, &id).await?))
}

// ---- runs and plans ----------------------------------------------------------------------------

async fn runs(Space(service): Space) -> ApiResult {
    ok(json!({ "runs": service.runs(DOOR).await? }))
}

async fn sweep(Space(service): Space, JsonBody(body): JsonBody<requests::Sweep>) -> ApiResult {
    let opts = SweepOptions { full: body.full, dry_run: body.dry_run, stale: body.stale };
    ok(json!(service.sweep(DOOR, opts).await?))
}

async fn run(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.run(DOOR, &id).await?))
}

async fn undo_run(
    Space(service): Space,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    let undo: requests::UndoRun = targeted("run", id, body)?;
    let run = undo.run.clone();
    ok(json!(service.undo(DOOR, &run, &undo.what()).await?))
}

async fn merge_entries(
    Space(service): Space,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    let merge: requests::Merge = targeted("id", id, body)?;
    ok(json!(service.merge(DOOR, &merge.ids(), merge.text.as_deref(), merge.note.as_deref()).await?))
}

async fn supersede_entry(
    Space(service): Space,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    let supersede: requests::Supersede = targeted("id", id, body)?;
    let by = supersede.successor()?;
    ok(json!(service.supersede(DOOR, &supersede.id, by, supersede.note.as_deref()).await?))
}

async fn plans(Space(service): Space) -> ApiResult {
    ok(json!({ "plans": service.plans(DOOR).await? }))
}

async fn plan(Space(service): Space, Path(id): Path<String>) -> ApiResult {
    ok(json!(service.plan(DOOR, &id).await?))
}

async fn apply_plan(
    Space(service): Space,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    let apply: requests::Apply = targeted("plan", id, body)?;
    ok(json!(service.apply_plan(DOOR, &apply.plan, apply.groups, apply.note.as_deref()).await?))
}

async fn reject_plan(
    Space(service): Space,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    let reject: requests::Reject = targeted("plan", id, body)?;
    ok(json!(service.reject_plan(DOOR, &reject.plan, reject.note.as_deref()).await?))
}

// ---- metrics -----------------------------------------------------------------------------------

async fn metrics(State(state): Shared) -> ApiResult {
    let text = state.spaces.metrics_text().await;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

// ---- the home ---------------------------------------------------------------------------------

async fn list_spaces(State(state): Shared) -> ApiResult {
    ok(json!({ "spaces": state.spaces.summaries().await }))
}

async fn share_entry(
    Space(service): Space,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> ApiResult {
    let share: requests::Share = targeted("id", id, body)?;
    ok(json!(service.share(DOOR, &share.id, &share.to).await?))
}

/// A request whose target the path names: the body's (or query's) fields, with the path's id
/// as `field`. The body naming the field itself is refused: the path says it.
fn targeted<T: DeserializeOwned>(field: &str, id: String, mut fields: Map<String, Value>) -> Result<T, ApiError> {
    if fields.contains_key(field) {
        return Err(ApiError::bad_request(format!("request body: `{field}` is the path's; leave it out of the body")));
    }
    fields.insert(field.to_string(), Value::String(id));
    serde_json::from_value(Value::Object(fields)).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}

// ---- MCP ---------------------------------------------------------------------------------------

/// `/mcp`: the MCP server of the request's space.
async fn mcp(State(state): Shared, request: Request) -> Response {
    let Some(resolved) = request.extensions().get::<Resolved>().cloned() else {
        return ApiError::new(StatusCode::FORBIDDEN, "forbidden", "the home's token names a space: /spaces/<name>/mcp")
            .into_response();
    };
    state.mcp.serve(&resolved.space, request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let json = |v: &'static str| is_json(Some(&HeaderValue::from_static(v)));
        assert!(json("application/json"));
        assert!(json("Application/JSON; charset=utf-8"));
        assert!(!json("text/plain"));
        assert!(!json("application/x-www-form-urlencoded"));
        assert!(!json("multipart/form-data; boundary=x"));
        assert!(!json("application/jsonx"));
        assert!(!is_json(None));
    }
}
