//! The HTTP API (README, "HTTP API"): axum routes whose handlers parse, call the library and answer JSON.
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
//! then, but for `GET /healthz`, the bearer token (the root's `.memfold/token`, or
//! `server.token_env`'s; see [`crate::service::token`]), as soon as its head is read. A request body,
//! where a route takes one, must be sent with `Content-Type: application/json` unless it is
//! empty (an empty body means `{}`). Connections are accepted by [`listen`] (header
//! timeout, connection cap).
//!
//! `POST/GET/DELETE /mcp` is the MCP server ([`crate::mcp`]) over streamable HTTP, behind the
//! same guard and token; it answers in MCP's terms (JSON-RPC), not with the error bodies above,
//! except for what the guard and the token check refuse first.
//!
//! Handlers parse, call one [`Service`] method and render; the status of every error comes from
//! its [`Kind`] in one place ([`ApiError::from`]). Consolidation never runs in a handler:
//! `POST /consolidate` asks the scheduler (through the service) and waits up to
//! `server.request_timeout_secs` for the report, then answers 202 with the request id whose
//! progress `GET /status` shows.

mod guard;
mod listen;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::NaiveDate;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::doors::mcp::McpServer;
use crate::error::{Error, Kind};
use crate::memory::views::PassOptions;
use crate::memory::{SearchRequest, TurnRequest};
use crate::service::workers::stopped;
use crate::service::{Door, PassAnswer, Service};
use crate::store::archive::NewFact;
use guard::Guard;
use listen::Limits;

/// How long open requests may take to finish after shutdown starts.
pub const HTTP_DRAIN: Duration = Duration::from_secs(10);

/// The state every handler gets: the service, the token the API requires, and how long a body
/// may take to arrive.
#[derive(Clone)]
struct Api {
    service: Arc<Service>,
    token: Option<Arc<str>>,
    body_timeout: Duration,
}

type Shared = State<Api>;
type ApiResult = Result<Response, ApiError>;

const DOOR: Door = Door::Http;

/// A bound listener and what the server answers on it.
pub struct Listener {
    pub listener: tokio::net::TcpListener,
    /// The address actually bound.
    pub addr: SocketAddr,
    /// The bearer token every route but `/healthz` requires, when set.
    pub token: Option<String>,
}

/// Serve the API on `http` until `stop` says so, letting open requests finish for at most
/// [`HTTP_DRAIN`]: the `http` worker of [`crate::doors::daemon::serve`].
pub async fn serve(service: Arc<Service>, http: Listener, stop: watch::Receiver<bool>) -> Result<(), String> {
    let server = &service.config().server;
    let limits = Limits {
        header_timeout: Duration::from_secs(server.header_timeout_secs),
        max_connections: server.max_connections,
        drain: HTTP_DRAIN,
    };
    let mcp = McpServer::new(service.clone());
    let rewritten = service.subscribe();
    // Cancelled on shutdown: MCP streams stay open otherwise and would hold the drain.
    let mcp_stop = CancellationToken::new();
    let app = router(service, http.addr, http.token, &mcp, mcp_stop.clone());
    let mut cancel = stop.clone();
    tokio::select! {
        () = listen::serve(http.listener, app, limits, stop) => Ok(()),
        () = async { stopped(&mut cancel).await; mcp_stop.cancel(); std::future::pending().await } => Ok(()),
        () = mcp.follow(rewritten) => Ok(()),
    }
}

/// The routes of the HTTP API over `service`, for a server listening on `bound` that requires
/// `token` (when set), with `mcp` served at `/mcp` until `mcp_stop` is cancelled.
fn router(
    service: Arc<Service>,
    bound: SocketAddr,
    token: Option<String>,
    mcp: &McpServer,
    mcp_stop: CancellationToken,
) -> Router {
    let server = &service.config().server;
    let guard = Arc::new(Guard::new(&server.bind, bound, &server.allowed_hosts));
    let (mcp, sessions) = mcp.http_service(guard.names(), server.max_body_bytes, mcp_stop);
    let max_body = server.max_body_bytes;
    let body_timeout = Duration::from_secs(server.body_timeout_secs);
    let max_sessions = server.max_mcp_sessions;
    let state = Api { service, token: token.map(Arc::from), body_timeout };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/facts", post(post_facts))
        .route("/turns", post(post_turns))
        .route("/search", get(search))
        .route("/consolidate", post(consolidate))
        .route("/status", get(status))
        .route("/entries", get(entries))
        .route("/entries/{id}", get(entry).delete(delete_entry))
        .route("/entries/{id}/history", get(entry_history))
        .route("/entries/{id}/pin", post(pin_entry))
        .route("/entries/{id}/unpin", post(unpin_entry))
        .route("/facts/{id}", get(fact))
        .route("/reindex", post(reindex))
        .route("/runs", get(runs))
        .route("/runs/{id}/undo", post(undo_run))
        .route("/plans", get(plans))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/apply", post(apply_plan))
        .route("/plans/{id}/reject", post(reject_plan))
        .route("/metrics", get(metrics))
        .nest_service("/mcp", mcp)
        .nest_service("/ui", crate::doors::web::router(state.service.clone(), bound.port(), state.token.clone()))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this route")
        })
        .layer(DefaultBodyLimit::max(max_body))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        // The last layer added runs first: the guard, then the token, then the session cap.
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            cap_sessions(sessions.clone(), max_sessions, request, next)
        }))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .layer(middleware::from_fn_with_state(guard, guard_requests))
        .layer(middleware::from_fn_with_state(state.clone(), count_responses))
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

/// Refuse a new MCP session (a POST to `/mcp` without `Mcp-Session-Id`) while `max` are open.
async fn cap_sessions(sessions: Arc<LocalSessionManager>, max: usize, request: Request, next: Next) -> Response {
    let opens = request.uri().path() == "/mcp"
        && request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if opens && sessions.sessions.read().await.len() >= max {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_sessions",
            format!("{max} MCP sessions are open (server.max_mcp_sessions); close one or try again later"),
        )
        .into_response();
    }
    next.run(request).await
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

/// Every request but `GET /healthz` (unknown routes too) needs the bearer token, checked once
/// the head is read and before any body.
async fn require_token(State(state): Shared, request: Request, next: Next) -> Response {
    // The review page signs browsers in with a session of its own (serve/ui); its cookie
    // never authenticates the API, and the token never reaches a page.
    let path = request.uri().path();
    let own = path == "/healthz" || path == "/ui" || path.starts_with("/ui/");
    if let Some(token) = state.token.as_ref().filter(|_| !own) {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let message = match given {
            None => "this server requires Authorization: Bearer <token>",
            Some(given) if !crate::service::token::same(given.as_bytes(), token.as_bytes()) => "wrong bearer token",
            Some(_) => return next.run(request).await,
        };
        return ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    }
    next.run(request).await
}

async fn count_responses(State(state): Shared, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    state.service.metrics().response(response.status().as_u16());
    response
}

async fn healthz() -> Json<Value> {
    Json(json!({"ok": true, "version": env!("CARGO_PKG_VERSION")}))
}

// ---- ingest ----------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FactsBody {
    facts: Vec<NewFact>,
}

async fn post_facts(State(state): Shared, JsonBody(body): JsonBody<FactsBody>) -> ApiResult {
    ok(json!(state.service.add(DOOR, body.facts).await?))
}

async fn post_turns(State(state): Shared, JsonBody(body): JsonBody<TurnRequest>) -> ApiResult {
    ok(json!(state.service.add_turn(DOOR, body.try_into()?).await?))
}

// ---- search ----------------------------------------------------------------------------------

#[derive(Deserialize)]
struct SearchParams {
    q: Option<String>,
    k: Option<usize>,
    as_of: Option<NaiveDate>,
    history: Option<bool>,
    /// `false`: do not record the hits in the recall log (a person browsing).
    recall: Option<bool>,
}

async fn search(State(state): Shared, params: Result<Query<SearchParams>, QueryRejection>) -> ApiResult {
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let request = SearchRequest {
        k: params.k,
        as_of: params.as_of,
        history: params.history.unwrap_or(false),
        skip_recall: params.recall == Some(false),
    };
    let hits = state.service.search(DOOR, &params.q.unwrap_or_default(), &request).await?;
    ok(json!({ "hits": hits }))
}

// ---- consolidation -----------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsolidateBody {
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
}

async fn consolidate(State(state): Shared, JsonBody(body): JsonBody<ConsolidateBody>) -> ApiResult {
    let opts = PassOptions { force: body.force, dry_run: body.dry_run };
    match state.service.consolidate(DOOR, opts).await? {
        PassAnswer::Done(report) => ok(json!(report)),
        PassAnswer::Running(running) => Ok((StatusCode::ACCEPTED, Json(json!(running))).into_response()),
    }
}

async fn status(State(state): Shared) -> ApiResult {
    ok(json!(state.service.status(DOOR).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReindexBody {
    #[serde(default)]
    clear: bool,
}

async fn reindex(State(state): Shared, JsonBody(body): JsonBody<ReindexBody>) -> ApiResult {
    ok(json!(state.service.reindex(DOOR, body.clear).await?))
}

// ---- entries -----------------------------------------------------------------------------------

async fn entries(State(state): Shared) -> ApiResult {
    ok(json!({"entries": state.service.entries(DOOR).await?}))
}

async fn entry(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.entry(DOOR, &id).await?))
}

#[derive(Deserialize)]
struct DeleteParams {
    reason: Option<String>,
}

async fn delete_entry(
    State(state): Shared,
    Path(id): Path<String>,
    params: Result<Query<DeleteParams>, QueryRejection>,
) -> ApiResult {
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    ok(json!(state.service.forget(DOOR, &id, params.reason.as_deref()).await?))
}

async fn pin_entry(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.pin(DOOR, &id, true).await?))
}

async fn unpin_entry(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.pin(DOOR, &id, false).await?))
}

async fn fact(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.fact(DOOR, &id).await?))
}

async fn entry_history(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.history(DOOR, &id).await?))
}

// ---- runs and plans ----------------------------------------------------------------------------

async fn runs(State(state): Shared) -> ApiResult {
    ok(json!({ "runs": state.service.runs(DOOR).await? }))
}

async fn undo_run(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.undo(DOOR, &id).await?))
}

async fn plans(State(state): Shared) -> ApiResult {
    ok(json!({ "plans": state.service.plans(DOOR).await? }))
}

async fn plan(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.plan(DOOR, &id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyBody {
    /// Op groups to apply (1-based, as `GET /plans/{id}` numbers them); the rest is rejected.
    /// Absent: the whole plan.
    #[serde(default)]
    groups: Option<Vec<usize>>,
}

async fn apply_plan(State(state): Shared, Path(id): Path<String>, JsonBody(body): JsonBody<ApplyBody>) -> ApiResult {
    ok(json!(state.service.apply_plan(DOOR, &id, body.groups).await?))
}

async fn reject_plan(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    ok(json!(state.service.reject_plan(DOOR, &id).await?))
}

// ---- metrics -----------------------------------------------------------------------------------

async fn metrics(State(state): Shared) -> ApiResult {
    let text = state.service.metrics_text().await;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
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
