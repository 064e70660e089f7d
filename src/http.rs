//! The HTTP API of DESIGN §4: axum routes whose handlers parse, call the library and answer JSON.
//!
//! Bodies mirror the CLI's `--json` output (DESIGN §7). Every error is
//! `{"error":{"code","message"}}` (plus `ids` when a 409 can name what is in the way) with a
//! fitting status: 400 bad input, 401 missing or wrong bearer token, 403 a request a browser
//! sent for another site, 404 unknown id or route, 405 wrong method, 409 consolidation lock
//! held, a stale write or a refused undo/apply, 413 body larger than `server.max_body_bytes`,
//! 415 a body not sent as `application/json`, 421 a Host the server does not answer to,
//! 502 an unusable LLM reply, 503 no LLM configured, the LLM or embedder unreachable, or the
//! daemon shutting down.
//! Every route first passes the [`Guard`] (Host allowlist, no cross-site browser requests).
//! When `server.token_env` names a set variable, every route but `GET /healthz` then requires
//! `Authorization: Bearer <token>`. A request body, where a route takes one, must be sent
//! with `Content-Type: application/json` unless it is empty (an empty body means `{}`).
//!
//! Blocking library calls (file reads and appends) go through `spawn_blocking`; index work is
//! async. Consolidation never runs in a handler: `POST /consolidate` asks the scheduler
//! worker ([`crate::daemon`]) and waits up to `server.request_timeout_secs` for the report,
//! then answers 202 with the request id whose progress `GET /status` shows.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::NaiveDate;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::consolidate::apply::ApplyError;
use crate::consolidate::pass::{PassError, PassOptions};
use crate::daemon::{AppState, PassReply, RequestError};
use crate::files::Root;
use crate::files::archive::{self, Fact, NewFact};
use crate::files::atomic::WriteError;
use crate::files::entries::{Entry, EntryFile};
use crate::forget::ForgetError;
use crate::guard::Guard;
use crate::index::SearchOpts;
use crate::llm::LlmError;
use crate::lock::LockError;
use crate::metrics::{Gauges, Via};
use crate::openai::HttpError;
use crate::review::{self, ReviewError};

type Shared = State<Arc<AppState>>;
type ApiResult = Result<Response, ApiError>;

/// The most hits one search may ask for.
const MAX_K: usize = 1000;

/// The routes of DESIGN §4 over `state`, for a server listening on `bound`.
pub fn router(state: Arc<AppState>, bound: SocketAddr) -> Router {
    let server = &state.config.server;
    let guard = Arc::new(Guard::new(&server.bind, bound, &server.allowed_hosts));
    let api = Router::new()
        .route("/facts", post(post_facts))
        .route("/turns", post(post_turns))
        .route("/search", get(search))
        .route("/consolidate", post(consolidate))
        .route("/status", get(status))
        .route("/entries", get(entries))
        .route("/entries/{id}", get(entry).delete(delete_entry))
        .route("/entries/{id}/history", get(entry_history))
        .route("/reindex", post(reindex))
        .route("/runs", get(runs))
        .route("/runs/{id}/undo", post(undo_run))
        .route("/plans", get(plans))
        .route("/plans/{id}/apply", post(apply_plan))
        .route("/plans/{id}/reject", post(reject_plan))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(api)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this route")
        })
        .layer(DefaultBodyLimit::max(state.config.server.max_body_bytes))
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

    fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    fn internal(error: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %error, "request failed");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string())
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

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = req.headers().get(header::CONTENT_TYPE).cloned();
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", rejection.body_text())
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

/// Whether a Content-Type is `application/json` (parameters such as `charset` allowed).
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// Run blocking library work off the runtime.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(ApiError::internal)
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

async fn require_token(State(state): Shared, request: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let message = match given {
            None => "this server requires Authorization: Bearer <token>",
            Some(given) if !same(given.as_bytes(), token.as_bytes()) => "wrong bearer token",
            Some(_) => return next.run(request).await,
        };
        return ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    }
    next.run(request).await
}

/// Compare without an early exit on the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn count_responses(State(state): Shared, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    state.metrics.response(response.status().as_u16());
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

fn check_facts(facts: &[NewFact]) -> Result<(), ApiError> {
    if facts.is_empty() {
        return Err(ApiError::bad_request("no facts given"));
    }
    if let Some(i) = facts.iter().position(|f| archive::clean_text(&f.text).is_empty()) {
        return Err(ApiError::bad_request(format!("fact {i} has no text")));
    }
    Ok(())
}

fn facts_json(facts: &[Fact]) -> Value {
    let facts: Vec<Value> = facts.iter().map(|f| json!({"id": f.id, "date": f.date, "text": f.text})).collect();
    json!({ "facts": facts })
}

async fn post_facts(State(state): Shared, JsonBody(body): JsonBody<FactsBody>) -> ApiResult {
    check_facts(&body.facts)?;
    let added = state.ingest(body.facts, Via::Facts).await.map_err(ApiError::internal)?;
    ok(facts_json(&added))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnBody {
    #[serde(default)]
    messages: Vec<TurnMessage>,
    #[serde(default)]
    text: Option<String>,
    /// Stored as the facts' `src` (default `turn`).
    #[serde(default)]
    source: Option<String>,
    /// The day the facts belong to (default today).
    #[serde(default)]
    date: Option<NaiveDate>,
}

#[derive(Deserialize)]
struct TurnMessage {
    role: String,
    content: String,
}

#[derive(Deserialize)]
struct Extracted {
    facts: Vec<ExtractedFact>,
}

#[derive(Deserialize)]
struct ExtractedFact {
    text: String,
}

/// Map an LLM failure: unreachable or overloaded is 503, an unusable reply is 502.
fn llm_error(e: LlmError) -> ApiError {
    let unavailable = match &e {
        LlmError::Http(HttpError::Unreachable { .. }) => true,
        LlmError::Http(HttpError::Status { status, .. }) => *status == 429 || *status >= 500,
        _ => false,
    };
    let message = format!("{e}; nothing was stored, send the turn again later");
    tracing::warn!(error = %e, "fact extraction failed");
    if unavailable {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "llm_unavailable", message)
    } else {
        ApiError::new(StatusCode::BAD_GATEWAY, "llm_bad_reply", message)
    }
}

async fn post_turns(State(state): Shared, JsonBody(body): JsonBody<TurnBody>) -> ApiResult {
    let turn = match (&body.text, body.messages.is_empty()) {
        (Some(text), true) if !text.trim().is_empty() => text.trim().to_string(),
        (None, false) => body
            .messages
            .iter()
            .map(|m| format!("{}: {}", m.role.trim(), m.content.trim()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Err(ApiError::bad_request("give either \"messages\" (non-empty) or \"text\" (non-empty)")),
    };
    let Some(chat) = &state.chat else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "llm_unavailable",
            "no LLM is configured ([llm] base_url is empty), so facts cannot be extracted from a turn; \
             nothing was stored. Send facts with POST /facts, or configure an LLM",
        ));
    };
    let today = body.date.unwrap_or_else(|| chrono::Local::now().date_naive());
    let user = format!("Today is {today}.\n\nTurn:\n{turn}");
    let (extracted, usage) =
        chat.complete_parsed::<Extracted>(&state.prompts.extract, &user).await.map_err(llm_error)?;
    state.metrics.extract_llm(usage);
    let source = Some(body.source.unwrap_or_else(|| "turn".into()));
    let facts: Vec<NewFact> = extracted
        .facts
        .into_iter()
        .filter(|f| !archive::clean_text(&f.text).is_empty())
        .map(|f| NewFact { text: f.text, date: body.date, source: source.clone() })
        .collect();
    let added = if facts.is_empty() {
        Vec::new()
    } else {
        state.ingest(facts, Via::Turns).await.map_err(ApiError::internal)?
    };
    let mut answer = facts_json(&added);
    answer["llm"] = json!(usage);
    ok(answer)
}

// ---- search ----------------------------------------------------------------------------------

#[derive(Deserialize)]
struct SearchParams {
    q: Option<String>,
    k: Option<usize>,
    as_of: Option<NaiveDate>,
    history: Option<bool>,
}

async fn search(State(state): Shared, params: Result<Query<SearchParams>, QueryRejection>) -> ApiResult {
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let query = params.q.unwrap_or_default();
    if query.trim().is_empty() {
        return Err(ApiError::bad_request("q (the query) is required"));
    }
    let mut opts = SearchOpts::new(&state.config.search, chrono::Local::now().date_naive());
    opts.k = params.k.unwrap_or(state.config.search.default_k);
    if opts.k == 0 || opts.k > MAX_K {
        return Err(ApiError::bad_request(format!("k must be between 1 and {MAX_K}")));
    }
    opts.as_of = params.as_of;
    opts.history = params.history.unwrap_or(false);
    state.ensure_fresh().await.map_err(ApiError::internal)?;
    let hits = state.index.search(&query, &opts).await.map_err(ApiError::internal)?;
    let ids: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
    let (root, window) = (state.root.clone(), state.config.recall.window_days);
    if let Err(e) = blocking(move || crate::recall::record(&root, &query, &ids, window)).await? {
        tracing::warn!(error = %e, "could not record recall");
    }
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

fn pass_error(e: PassError) -> ApiError {
    match &e {
        PassError::Busy(LockError::Held { .. }) => ApiError::new(StatusCode::CONFLICT, "lock_held", e.to_string()),
        PassError::Apply(ApplyError::Stale) => ApiError::new(StatusCode::CONFLICT, "stale_write", e.to_string()),
        PassError::Embed(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "embedding_unavailable", e.to_string()),
        _ => ApiError::internal(e),
    }
}

async fn consolidate(State(state): Shared, JsonBody(body): JsonBody<ConsolidateBody>) -> ApiResult {
    let opts = PassOptions { force: body.force, dry_run: body.dry_run };
    match state.request_pass(opts).await {
        Ok(PassReply::Done(result)) => match *result {
            Ok(report) => ok(json!(report)),
            Err(e) => Err(pass_error(e)),
        },
        Ok(PassReply::Running(request)) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({
                "status": "running",
                "request": request,
                "message": format!(
                    "the pass takes longer than server.request_timeout_secs ({}s) and continues in the \
                     background; GET /status shows it under daemon.passes, GET /runs once it is applied",
                    state.config.server.request_timeout_secs
                ),
            })),
        )
            .into_response()),
        Err(e @ RequestError::QueueFull(_)) => Err(ApiError::new(StatusCode::CONFLICT, "busy", e.to_string())),
        Err(e) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", e.to_string())),
    }
}

async fn status(State(state): Shared) -> ApiResult {
    let (root, config) = (state.root.clone(), state.config.clone());
    let status = blocking(move || crate::status::status(&root, &config)).await?.map_err(ApiError::internal)?;
    let mut body = json!(status);
    body["daemon"] = state.daemon_status();
    ok(body)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReindexBody {
    #[serde(default)]
    clear: bool,
}

async fn reindex(State(state): Shared, JsonBody(body): JsonBody<ReindexBody>) -> ApiResult {
    let started = std::time::Instant::now();
    let (docs, stats) = state.reindex(body.clear).await.map_err(ApiError::internal)?;
    ok(json!({"docs": docs, "stats": stats, "seconds": started.elapsed().as_secs_f64()}))
}

// ---- entries -----------------------------------------------------------------------------------

fn entry_json(e: &Entry) -> Value {
    let m = &e.meta;
    let mut v = json!({
        "id": e.id(),
        "content": e.content,
        "first_seen": m.first_seen,
        "updated": m.updated,
        "sources": m.sources,
        "pinned": m.pinned,
    });
    if let Some(kind) = &m.kind {
        v["kind"] = json!(kind);
    }
    v
}

/// The current entries (`consolidated/memory.md`).
async fn read_memory(state: &AppState) -> Result<EntryFile, ApiError> {
    let root = state.root.clone();
    blocking(move || {
        EntryFile::read(&root.memory(), "consolidated/memory.md")
            .map_err(|e| ApiError::internal(format!("reading consolidated/memory.md: {e}")))
    })
    .await?
}

async fn entries(State(state): Shared) -> ApiResult {
    let memory = read_memory(&state).await?;
    ok(json!({"entries": memory.entries().map(entry_json).collect::<Vec<_>>()}))
}

async fn entry(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    let memory = read_memory(&state).await?;
    match memory.get(&id) {
        Some(e) => ok(entry_json(e)),
        None => Err(ApiError::not_found(format!("no current entry has id {id}"))),
    }
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
    let root = state.root.clone();
    let target = id.clone();
    let done = blocking(move || crate::forget::forget(&root, &target, params.reason.as_deref())).await?;
    let done = done.map_err(|e| match &e {
        ForgetError::NotFound(_) => ApiError::not_found(e.to_string()),
        ForgetError::Busy(LockError::Held { .. }) => ApiError::new(StatusCode::CONFLICT, "lock_held", e.to_string()),
        ForgetError::Write(WriteError::Stale { .. }) => {
            ApiError::new(StatusCode::CONFLICT, "stale_write", e.to_string())
        }
        _ => ApiError::internal(e),
    })?;
    state.mark_dirty();
    if let Err(e) = state.ensure_fresh().await {
        tracing::warn!(error = %e, "index refresh after forget failed; the indexer will retry");
    }
    ok(json!(done))
}

// ---- runs and plans ----------------------------------------------------------------------------

fn review_error(e: ReviewError) -> ApiError {
    match e {
        ReviewError::NotFound { .. } => ApiError::not_found(e.to_string()),
        ReviewError::BadInput(_) => ApiError::bad_request(e.to_string()),
        ReviewError::Conflict { ref ids, .. } => {
            let ids = ids.clone();
            ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()).with_ids(ids)
        }
        ReviewError::Stale { ref ids, .. } => {
            let ids = ids.clone();
            ApiError::new(StatusCode::CONFLICT, "stale_write", e.to_string()).with_ids(ids)
        }
        ReviewError::Busy(_) => ApiError::new(StatusCode::CONFLICT, "lock_held", e.to_string()),
        e => ApiError::internal(e),
    }
}

/// Run a review call off the runtime and map its error.
async fn review_call<T: Send + 'static>(
    state: &AppState,
    call: impl FnOnce(&Root) -> Result<T, ReviewError> + Send + 'static,
) -> Result<T, ApiError> {
    let root = state.root.clone();
    blocking(move || call(&root)).await?.map_err(review_error)
}

/// After an undo or an applied plan changed memory.md: rewrite MEMORY.md, bring the index up to date.
async fn after_change(state: &AppState) {
    let llm = state.chat.as_ref().map(|client| (client, state.prompts.promote.as_str()));
    match crate::promote::promote(&state.root, &state.config, llm).await {
        Ok(report) => state.metrics.promote_llm(report.llm),
        Err(e) => tracing::warn!(error = %e, "MEMORY.md not rewritten"),
    }
    state.mark_dirty();
    if let Err(e) = state.ensure_fresh().await {
        tracing::warn!(error = %e, "index refresh failed; the indexer will retry");
    }
}

async fn entry_history(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    let chain = review_call(&state, move |root| review::history_chain(root, &id)).await?;
    ok(json!(chain))
}

async fn runs(State(state): Shared) -> ApiResult {
    let runs = review_call(&state, review::runs).await?;
    ok(json!({ "runs": runs }))
}

async fn undo_run(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    let undone = review_call(&state, move |root| review::undo(root, &id)).await?;
    after_change(&state).await;
    ok(json!(undone))
}

async fn plans(State(state): Shared) -> ApiResult {
    let plans = review_call(&state, review::plans).await?;
    ok(json!({ "plans": plans }))
}

async fn apply_plan(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    let applied = review_call(&state, move |root| review::apply_plan(root, &id)).await?;
    after_change(&state).await;
    ok(json!(applied))
}

async fn reject_plan(State(state): Shared, Path(id): Path<String>) -> ApiResult {
    let rejected = review_call(&state, move |root| review::reject_plan(root, &id)).await?;
    ok(json!(rejected))
}

// ---- metrics -----------------------------------------------------------------------------------

async fn metrics(State(state): Shared) -> ApiResult {
    let root = state.root.clone();
    let counts = blocking(move || crate::ledger::Ledger::load(&root)).await?.map(|ledger| {
        let pending = ledger.pending().len();
        (pending, ledger.memory.entries().count())
    });
    let gauges = match counts {
        Ok((pending, entries)) => {
            Gauges { pending_facts: Some(pending), entries: Some(entries), uptime: state.uptime() }
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics: could not read the files; leaving out the file gauges");
            Gauges { uptime: state.uptime(), ..Gauges::default() }
        }
    };
    let text = state.metrics.render(gauges);
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

    #[test]
    fn token_comparison() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }
}
