//! The review page: server-rendered HTML under `/ui` on the daemon's own listener.
//!
//! Every page rereads the files through the one [`Service`] (so what it shows is never stale),
//! and every action is a plain form: POST, then a 303 to the page that shows the result, so
//! the page works with JavaScript off. Handlers parse, call the service and render; templates
//! (askama, `templates/ui/`) escape every value, and memory text is never rendered as HTML.
//!
//! **Who may use it** ([`session`]): a browser signs in with a one-time code from
//! `memfold ui` (opening its address shows a button; the POST consumes the code) or by pasting
//! the token once, and gets an HttpOnly, SameSite=Strict cookie named after the port. Every
//! form carries the session's CSRF token. The cookie never authenticates the JSON API, and the
//! bearer token is never put in a page. With `server.auth = false` (loopback only) the first
//! visit gets a session without signing in, so the CSRF checks stay the same. The router's
//! guard (Host allowlist, no cross-site browser requests) runs before all of it.
//!
//! **Headers** on every response: a strict Content-Security-Policy (no script, styles from
//! this server only, no framing), `nosniff`, a referrer only to this origin, and `no-store` on
//! pages. (`Referrer-Policy: no-referrer` would make browsers send `Origin: null` with every
//! form post, which the guard rightly refuses as coming from an unknown page.)

pub mod session;

use std::collections::BTreeMap;
use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::doors::http::status_of;
use crate::error::Error;
use crate::memory::SearchRequest;
use crate::memory::views::{FactView, PlanDetail, Version};
use crate::service::{Door, Service};
use session::Sessions;

const DOOR: Door = Door::Ui;
/// The style sheet's address; the number changes with its content, so it can be cached for good.
const CSS_PATH: &str = "/ui/assets/ui-1.css";
const CSS: &str = include_str!("../../../assets/ui.css");
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// What the page's handlers share.
#[derive(Clone)]
pub struct Ui {
    service: Arc<Service>,
    sessions: Arc<Sessions>,
    /// `memfold-<port>`: two daemons on one machine keep their sessions apart.
    cookie: Arc<str>,
    /// The bearer token, for the paste-once sign-in; None when the server runs without one.
    token: Option<Arc<str>>,
}

/// The signed-in session of a request, put there by [`signed_in`].
#[derive(Clone)]
struct Session {
    csrf: String,
}

/// The routes under `/ui` (nest them there), for a server on `port` that requires `token`.
pub fn router(service: Arc<Service>, port: u16, token: Option<Arc<str>>) -> Router {
    let ui = Ui { service, sessions: Arc::default(), cookie: Arc::from(format!("memfold-{port}")), token };
    let pages = Router::new()
        .route("/", get(inbox))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/diff", get(plan_diff))
        .route("/plans/{id}/decide", post(decide))
        .route("/runs", get(runs))
        .route("/runs/{id}/undo", post(undo))
        .route("/entries/{id}", get(entry))
        .route("/entries/{id}/pin", post(pin))
        .route("/entries/{id}/unpin", post(unpin))
        .route("/entries/{id}/forget", get(forget_page).post(forget))
        .route("/facts/{id}", get(fact))
        .route("/search", get(search))
        .layer(middleware::from_fn_with_state(ui.clone(), signed_in));
    Router::new()
        .merge(pages)
        .route("/login", get(login_page).post(login))
        .route(CSS_PATH.trim_start_matches("/ui"), get(css))
        .layer(middleware::map_response(secure_headers))
        .with_state(ui)
}

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

async fn css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        CSS,
    )
        .into_response()
}

fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

fn session_cookie(ui: &Ui, id: &str) -> HeaderValue {
    let value =
        format!("{}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}", ui.cookie, session::SESSION_IDLE.as_secs());
    HeaderValue::from_str(&value).expect("hex ids make a valid header")
}

/// Let signed-in browsers through (and, on a server without a token, sign a new one in);
/// send the others to the sign-in page.
async fn signed_in(State(ui): State<Ui>, mut request: Request, next: Next) -> Response {
    let known = cookie_value(request.headers(), &ui.cookie).and_then(|id| ui.sessions.csrf(&id));
    match known {
        Some(csrf) => {
            request.extensions_mut().insert(Session { csrf });
            next.run(request).await
        }
        None if ui.token.is_none() => {
            let (id, csrf) = ui.sessions.create();
            request.extensions_mut().insert(Session { csrf });
            let mut response = next.run(request).await;
            response.headers_mut().append(header::SET_COOKIE, session_cookie(&ui, &id));
            response
        }
        None => Redirect::to("/ui/login").into_response(),
    }
}

// ---- pieces every page has --------------------------------------------------------------------

/// The frame of a page: the navigation, the session's CSRF token, a message after an action.
struct Nav {
    current: &'static str,
    csrf: String,
    css: &'static str,
    flash: Option<String>,
}

impl Nav {
    fn new(current: &'static str, session: &Session, done: &Done) -> Nav {
        Nav { current, csrf: session.csrf.clone(), css: CSS_PATH, flash: done.message() }
    }
}

/// What the action before a redirect did (`?done=…&run=…`); only known words are shown.
#[derive(Debug, Default, Deserialize)]
struct Done {
    done: Option<String>,
    run: Option<String>,
    n: Option<usize>,
}

impl Done {
    fn message(&self) -> Option<String> {
        let run = self.run.as_deref().filter(|r| crate::planning::consolidate::records::check_id("run", r).is_ok());
        Some(match (self.done.as_deref()?, run) {
            ("applied", Some(run)) => match self.n {
                Some(n) if n > 0 => {
                    format!("Applied as run {run}; the other groups were rejected, their {n} facts are pending again.")
                }
                _ => format!("Applied as run {run}."),
            },
            ("rejected", _) => "Rejected: its facts are pending again.".into(),
            ("undone", Some(run)) => format!("Run {run} undone."),
            ("pinned", _) => "Pinned: consolidation leaves it as it is.".into(),
            ("unpinned", _) => "Unpinned.".into(),
            ("forgotten", _) => "Forgotten: it moved to history and its facts are tombstoned.".into(),
            _ => return None,
        })
    }
}

/// An error shown in a page.
struct Alert {
    message: String,
    ids: Vec<String>,
}

impl From<&Error> for Alert {
    fn from(e: &Error) -> Alert {
        let message = match e.kind() {
            crate::error::Kind::Busy => format!("A consolidation pass is running; try again in a moment. ({e})"),
            _ => e.to_string(),
        };
        Alert { message, ids: e.ids().to_vec() }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/error.html")]
struct ErrorPage {
    nav: Nav,
    title: String,
    alert: Alert,
}

/// An error as a page with its status.
fn error_page(e: &Error, session: &Session, title: &str) -> Response {
    let page =
        ErrorPage { nav: Nav::new("", session, &Done::default()), title: title.to_string(), alert: Alert::from(e) };
    (status_of(e.kind()), page).into_response()
}

fn ago(when: DateTime<Utc>) -> String {
    let minutes = (Utc::now() - when).num_minutes().max(0);
    match minutes {
        0 => "just now".into(),
        m if m < 60 => format!("{m} min ago"),
        m if m < 48 * 60 => format!("{} h ago", m / 60),
        m => format!("{} days ago", m / (24 * 60)),
    }
}

fn kinds(counts: &BTreeMap<String, usize>) -> String {
    counts.iter().map(|(k, n)| format!("{n} {k}")).collect::<Vec<_>>().join(", ")
}

/// The fields of a signed-in POST whose form carries the session's CSRF token. A handler that
/// takes it cannot run for a form another page made: without the token the request is refused
/// (403) before the handler, and nothing is changed.
struct CheckedForm(Vec<(String, String)>);

impl<S: Send + Sync> axum::extract::FromRequest<S> for CheckedForm {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let session = req.extensions().get::<Session>().cloned();
        let Form(fields) =
            Form::<Vec<(String, String)>>::from_request(req, state).await.map_err(IntoResponse::into_response)?;
        let Some(session) = session else {
            return Err(Redirect::to("/ui/login").into_response());
        };
        let given = field(&fields, "csrf").unwrap_or("");
        if crate::service::token::same(given.as_bytes(), session.csrf.as_bytes()) {
            return Ok(CheckedForm(fields));
        }
        let alert = Alert {
            message: "The form was not sent by this page (its CSRF field is missing or wrong); nothing was changed. \
                      Reload the page and try again."
                .into(),
            ids: Vec::new(),
        };
        let page = ErrorPage { nav: Nav::new("", &session, &Done::default()), title: "Refused".into(), alert };
        Err((StatusCode::FORBIDDEN, page).into_response())
    }
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

// ---- inbox ------------------------------------------------------------------------------------

struct PlanRow {
    id: String,
    reason: String,
    created: String,
    age: String,
    ops: String,
    added: usize,
    removed: usize,
    llm: String,
    stale: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/inbox.html")]
struct InboxPage {
    nav: Nav,
    status: crate::memory::views::Status,
    plans: Vec<PlanRow>,
    rejected: usize,
}

async fn inbox(State(ui): State<Ui>, session: axum::Extension<Session>, done: Query<Done>) -> Response {
    let service = &ui.service;
    let (status, plans) = match (service.status(DOOR).await, service.plans(DOOR).await) {
        (Ok(status), Ok(plans)) => (status.status, plans),
        (Err(e), _) | (_, Err(e)) => return error_page(&e, &session, "Inbox"),
    };
    let rejected =
        plans.iter().filter(|p| p.status == crate::planning::consolidate::records::PlanStatus::Rejected).count();
    let plans = plans
        .into_iter()
        .filter(|p| p.status == crate::planning::consolidate::records::PlanStatus::Pending)
        .map(|p| {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for op in &p.ops {
                *counts.entry(op.op.to_string()).or_default() += 1;
            }
            PlanRow {
                reason: p.reason.to_string(),
                created: p.created.to_rfc3339(),
                age: ago(p.created),
                ops: kinds(&counts),
                added: p.stat.added,
                removed: p.stat.removed,
                llm: format!("{} calls, {} tokens", p.llm.calls, p.llm.prompt_tokens + p.llm.completion_tokens),
                stale: p.stale,
                id: p.id,
            }
        })
        .collect();
    InboxPage { nav: Nav::new("inbox", &session, &done), status, plans, rejected }.into_response()
}

// ---- plan -------------------------------------------------------------------------------------

struct FactRow {
    id: String,
    date: String,
    when: String,
    src: Option<String>,
    text: String,
}

struct ChangeRow {
    entry: String,
    before: String,
    after: String,
    runs: Vec<crate::planning::diff::WordRun>,
    /// What changed besides the text (sources, dates), in words.
    notes: String,
}

struct OpRow {
    kind: &'static str,
    target: Option<String>,
    into: Option<String>,
    why: Option<String>,
    signals: String,
    confidence: Option<String>,
    changes: Vec<ChangeRow>,
}

struct GroupRow {
    group: usize,
    facts: Vec<FactRow>,
    ops: Vec<OpRow>,
    left_alone: Vec<crate::planning::consolidate::records::SeenEntry>,
    /// The group in a line: its ops and their targets.
    summary: String,
    /// The lowest confidence of its ops, when the decider gave one.
    confidence: Option<String>,
}

/// Groups shown in full on one plan page; every group has its row in the form on every page,
/// so a large plan is decided on any of its pages and each page stays small.
const GROUPS_PER_PAGE: usize = 8;

/// `?from=N`: the first group shown in full.
#[derive(Deserialize, Default)]
struct Window {
    from: Option<usize>,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/plan.html")]
struct PlanPage {
    nav: Nav,
    id: String,
    headline: String,
    stale: bool,
    pending: bool,
    rejected: Option<String>,
    groups: Vec<GroupRow>,
    /// The groups shown in full: `groups[shown.0..shown.1]`.
    shown: (usize, usize),
    /// `from` of the previous and the next page of groups.
    pages: (Option<usize>, Option<usize>),
    alert: Option<Alert>,
}

impl PlanPage {
    fn in_full(&self) -> &[GroupRow] {
        &self.groups[self.shown.0..self.shown.1]
    }

    /// The address of the page showing group `n` in full.
    fn group_link(&self, n: usize) -> String {
        format!("/ui/plans/{}?from={}#g{n}", self.id, (n - 1) / GROUPS_PER_PAGE * GROUPS_PER_PAGE + 1)
    }
}

/// An entry block's content and its header's sources and dates, apart.
fn block_parts(block: &str) -> (String, Vec<String>, String) {
    let file = crate::store::entries::EntryFile::parse(block, "plan");
    match file.entries().next() {
        Some(e) => {
            let dates = format!(
                "first seen {}, updated {}",
                e.meta.first_seen.map_or("?".into(), |d| d.to_string()),
                e.meta.updated.map_or("?".into(), |d| d.to_string())
            );
            (e.content.clone(), e.meta.sources.clone(), dates)
        }
        None => (block.to_string(), Vec::new(), String::new()),
    }
}

fn change_row(c: &crate::memory::views::EntryChange) -> ChangeRow {
    let (before, before_sources, _) = c.before.as_deref().map(block_parts).unwrap_or_default();
    let (after, after_sources, after_dates) = c.after.as_deref().map(block_parts).unwrap_or_default();
    let added: Vec<&String> = after_sources.iter().filter(|s| !before_sources.contains(s)).collect();
    let mut notes = Vec::new();
    if !added.is_empty() {
        notes.push(format!("sources added: {}", added.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")));
    }
    if c.after.is_some() && !after_dates.is_empty() {
        notes.push(after_dates);
    }
    ChangeRow {
        entry: c.entry.clone(),
        runs: crate::planning::diff::words(&before, &after),
        before,
        after,
        notes: notes.join("; "),
    }
}

fn plan_page(detail: PlanDetail, from: Option<usize>, nav: Nav, alert: Option<Alert>) -> PlanPage {
    let facts: BTreeMap<&str, &crate::store::archive::Fact> =
        detail.fact_texts.iter().map(|f| (f.id.as_str(), f)).collect();
    let groups = detail
        .groups
        .iter()
        .map(|g| GroupRow {
            group: g.group,
            facts: g
                .facts
                .iter()
                .map(|id| match facts.get(id.as_str()) {
                    Some(f) => FactRow {
                        id: f.id.clone(),
                        date: f.date.to_string(),
                        when: match &f.time {
                            Some(t) => format!("{} {t}", f.date),
                            None => f.date.to_string(),
                        },
                        src: f.src.clone(),
                        text: f.text.clone(),
                    },
                    None => FactRow {
                        id: id.clone(),
                        date: String::new(),
                        when: String::new(),
                        src: None,
                        text: "(not stored with the plan)".into(),
                    },
                })
                .collect(),
            ops: g
                .ops
                .iter()
                .map(|op| OpRow {
                    kind: op.op.op.as_str(),
                    target: op.op.target.clone(),
                    into: op.op.into.clone(),
                    why: op.op.why.clone(),
                    signals: op.op.signals.join(", "),
                    confidence: op.op.confidence.map(|c| format!("{c:.2}")),
                    changes: op.changes.iter().map(change_row).collect(),
                })
                .collect(),
            left_alone: g.left_alone.clone(),
            summary: g.ops.iter().map(|op| crate::doors::render::op_label(&op.op)).collect::<Vec<_>>().join(", "),
            confidence: g.ops.iter().filter_map(|op| op.op.confidence).reduce(f64::min).map(|c| format!("{c:.2}")),
        })
        .collect::<Vec<GroupRow>>();
    let plan = &detail.plan;
    let n = groups.len();
    let start = from.unwrap_or(1).clamp(1, n.max(1)) - 1;
    let start = start / GROUPS_PER_PAGE * GROUPS_PER_PAGE;
    let end = (start + GROUPS_PER_PAGE).min(n);
    let pages = (start.checked_sub(GROUPS_PER_PAGE).map(|p| p + 1), (end < n).then_some(end + 1));
    PlanPage {
        nav,
        id: plan.id.clone(),
        headline: plan.headline(),
        stale: plan.stale,
        pending: plan.status == crate::planning::consolidate::records::PlanStatus::Pending,
        rejected: plan.rejected.map(|t| t.to_rfc3339()),
        groups,
        shown: (start.min(end), end),
        pages,
        alert,
    }
}

async fn plan(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(id): Path<String>,
    done: Query<Done>,
    window: Query<Window>,
) -> Response {
    match ui.service.plan(DOOR, &id).await {
        Ok(detail) => plan_page(detail, window.from, Nav::new("inbox", &session, &done), None).into_response(),
        Err(e) => error_page(&e, &session, "Plan"),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/plan_diff.html")]
struct PlanDiffPage {
    nav: Nav,
    id: String,
    diff: String,
}

/// A plan's whole change to `memory.md` as a unified diff.
async fn plan_diff(State(ui): State<Ui>, session: axum::Extension<Session>, Path(id): Path<String>) -> Response {
    match ui.service.plan(DOOR, &id).await {
        Ok(detail) => PlanDiffPage {
            nav: Nav::new("inbox", &session, &Done::default()),
            id: detail.plan.id.clone(),
            diff: detail.plan.diff,
        }
        .into_response(),
        Err(e) => error_page(&e, &session, "Plan"),
    }
}

/// Apply all, apply the checked groups and reject the rest, or reject all.
async fn decide(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(id): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let result = match field(&fields, "action") {
        Some("reject") => ui.service.reject_plan(DOOR, &id).await.map(|_| "/ui?done=rejected".to_string()),
        action @ (Some("all") | Some("checked")) => {
            let groups = match action {
                Some("checked") => {
                    let picked: Vec<usize> =
                        fields.iter().filter(|(k, _)| k == "group").filter_map(|(_, v)| v.parse().ok()).collect();
                    if picked.is_empty() {
                        Err(Error::BadInput(
                            "no group was checked: check the groups to apply, or reject the plan".into(),
                        ))
                    } else {
                        Ok(Some(picked))
                    }
                }
                _ => Ok(None),
            };
            match groups {
                Ok(groups) => ui
                    .service
                    .apply_plan(DOOR, &id, groups)
                    .await
                    .map(|a| format!("/ui/runs?done=applied&run={}&n={}", a.run, a.rejected.len())),
                Err(e) => Err(e),
            }
        }
        _ => Err(Error::BadInput("unknown action".into())),
    };
    match result {
        Ok(to) => Redirect::to(&to).into_response(),
        // Shown on the plan itself, with the entries in the way linked.
        Err(e) => match ui.service.plan(DOOR, &id).await {
            Ok(detail) => {
                let nav = Nav::new("inbox", &session, &Done::default());
                let page = plan_page(detail, None, nav, Some(Alert::from(&e)));
                (status_of(e.kind()), page).into_response()
            }
            Err(_) => error_page(&e, &session, "Plan"),
        },
    }
}

// ---- runs -------------------------------------------------------------------------------------

struct RunRow {
    run: String,
    time: String,
    when: String,
    plan: Option<String>,
    ops: String,
    facts: usize,
    llm: String,
    undone: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/runs.html")]
struct RunsPage {
    nav: Nav,
    runs: Vec<RunRow>,
    alert: Option<Alert>,
}

async fn runs_page(ui: &Ui, nav: Nav, alert: Option<Alert>) -> Response {
    match ui.service.runs(DOOR).await {
        Ok(runs) => {
            let runs = runs
                .into_iter()
                .rev()
                .map(|r| RunRow {
                    time: r.time.to_rfc3339(),
                    when: format!("{} ({})", r.time.format("%Y-%m-%d %H:%M"), ago(r.time)),
                    plan: r.plan,
                    ops: kinds(&r.ops),
                    facts: r.facts,
                    llm: r.llm.map_or(String::new(), |u| format!("{} calls", u.calls)),
                    undone: r.undone.map(|t| t.format("%Y-%m-%d %H:%M").to_string()),
                    run: r.run,
                })
                .collect();
            RunsPage { nav, runs, alert }.into_response()
        }
        Err(e) => error_page(&e, &Session { csrf: nav.csrf }, "Runs"),
    }
}

async fn runs(State(ui): State<Ui>, session: axum::Extension<Session>, done: Query<Done>) -> Response {
    runs_page(&ui, Nav::new("runs", &session, &done), None).await
}

async fn undo(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(run): Path<String>,
    _: CheckedForm,
) -> Response {
    match ui.service.undo(DOOR, &run).await {
        Ok(undone) => Redirect::to(&format!("/ui/runs?done=undone&run={}", undone.run)).into_response(),
        Err(e) => {
            let mut response =
                runs_page(&ui, Nav::new("runs", &session, &Done::default()), Some(Alert::from(&e))).await;
            *response.status_mut() = status_of(e.kind());
            response
        }
    }
}

// ---- entries and facts ------------------------------------------------------------------------

#[derive(Template, WebTemplate)]
#[template(path = "ui/entry.html")]
struct EntryPage {
    nav: Nav,
    id: String,
    current: Option<String>,
    pinned: bool,
    versions: Vec<Version>,
    alert: Option<Alert>,
}

async fn entry_page(ui: &Ui, id: &str, nav: Nav, alert: Option<Alert>) -> Response {
    let chain = match ui.service.history(DOOR, id).await {
        Ok(chain) => chain,
        Err(e) => return error_page(&e, &Session { csrf: nav.csrf }, "Entry"),
    };
    let current = chain.versions.iter().find(|v| v.id == id && v.status.is_current());
    let (current, pinned) = (current.map(|v| v.content.clone()), current.is_some_and(|v| v.pinned));
    EntryPage { nav, id: id.to_string(), current, pinned, versions: chain.versions, alert }.into_response()
}

async fn entry(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(id): Path<String>,
    done: Query<Done>,
) -> Response {
    entry_page(&ui, &id, Nav::new("", &session, &done), None).await
}

async fn set_pin(ui: &Ui, session: &Session, id: &str, pinned: bool) -> Response {
    match ui.service.pin(DOOR, id, pinned).await {
        Ok(_) => {
            let done = if pinned { "pinned" } else { "unpinned" };
            Redirect::to(&format!("/ui/entries/{id}?done={done}")).into_response()
        }
        Err(e) => error_page(&e, session, "Entry"),
    }
}

async fn pin(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(id): Path<String>,
    _: CheckedForm,
) -> Response {
    set_pin(&ui, &session, &id, true).await
}

async fn unpin(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(id): Path<String>,
    _: CheckedForm,
) -> Response {
    set_pin(&ui, &session, &id, false).await
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/forget.html")]
struct ForgetPage {
    nav: Nav,
    id: String,
    content: String,
}

async fn forget_page(State(ui): State<Ui>, session: axum::Extension<Session>, Path(id): Path<String>) -> Response {
    match ui.service.entry(DOOR, &id).await {
        Ok(entry) => {
            ForgetPage { nav: Nav::new("", &session, &Done::default()), id, content: entry.content }.into_response()
        }
        Err(e) => error_page(&e, &session, "Forget"),
    }
}

async fn forget(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Path(id): Path<String>,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let reason = field(&fields, "reason").map(str::trim).filter(|r| !r.is_empty());
    match ui.service.forget(DOOR, &id, reason).await {
        Ok(_) => Redirect::to("/ui?done=forgotten").into_response(),
        Err(e) => error_page(&e, &session, "Forget"),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/fact.html")]
struct FactPage {
    nav: Nav,
    fact: FactView,
    fate: &'static str,
}

async fn fact(State(ui): State<Ui>, session: axum::Extension<Session>, Path(id): Path<String>) -> Response {
    match ui.service.fact(DOOR, &id).await {
        Ok(fact) => {
            let fate = match fact.fate {
                crate::store::ledger::FactFate::Pending => "Pending: no entry holds it yet",
                crate::store::ledger::FactFate::Consolidated => "Consolidated",
                crate::store::ledger::FactFate::Tombstoned => "Tombstoned: forgotten by a person",
            };
            FactPage { nav: Nav::new("", &session, &Done::default()), fact, fate }.into_response()
        }
        Err(e) => error_page(&e, &session, "Fact"),
    }
}

// ---- search -----------------------------------------------------------------------------------

struct HitRow {
    kind: &'static str,
    id: String,
    link: String,
    text: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/search.html")]
struct SearchPage {
    nav: Nav,
    q: String,
    searched: bool,
    hits: Vec<HitRow>,
}

#[derive(Deserialize)]
struct SearchParams {
    q: Option<String>,
}

/// A person browsing: the hits are not recorded in the recall log.
async fn search(
    State(ui): State<Ui>,
    session: axum::Extension<Session>,
    Query(params): Query<SearchParams>,
) -> Response {
    let q = params.q.unwrap_or_default();
    let nav = Nav::new("search", &session, &Done::default());
    if q.trim().is_empty() {
        return SearchPage { nav, q, searched: false, hits: Vec::new() }.into_response();
    }
    let request = SearchRequest { k: Some(20), skip_recall: true, ..SearchRequest::default() };
    match ui.service.search(DOOR, &q, &request).await {
        Ok(hits) => {
            let hits = hits
                .into_iter()
                .map(|h| {
                    let kind = h.kind.as_str();
                    let link = match h.kind {
                        crate::index::DocKind::Fact => format!("/ui/facts/{}", h.id),
                        _ => format!("/ui/entries/{}", h.id),
                    };
                    HitRow { kind, id: h.id, link, text: h.text }
                })
                .collect();
            SearchPage { nav, q, searched: true, hits }.into_response()
        }
        Err(e) => error_page(&e, &session, "Search"),
    }
}

// ---- sign-in ----------------------------------------------------------------------------------

#[derive(Template, WebTemplate)]
#[template(path = "ui/login.html")]
struct LoginPage {
    css: &'static str,
    code: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct LoginParams {
    code: Option<String>,
}

/// Shows a button; opening the address does not use the code up (link previews and
/// prefetchers open addresses too).
async fn login_page(Query(params): Query<LoginParams>) -> Response {
    let code = params.code.filter(|c| !c.is_empty() && c.len() <= 128);
    LoginPage { css: CSS_PATH, code, message: None }.into_response()
}

async fn login(State(ui): State<Ui>, Form(fields): Form<Vec<(String, String)>>) -> Response {
    let by_code = match field(&fields, "code") {
        Some(code) => ui.service.sign_in(code).await,
        None => false,
    };
    let by_token = match (field(&fields, "token"), &ui.token) {
        (Some(given), Some(token)) => crate::service::token::same(given.trim().as_bytes(), token.as_bytes()),
        _ => false,
    };
    if !(by_code || by_token) {
        let message = if field(&fields, "code").is_some() {
            "That sign-in address was used already or is more than 2 minutes old: run `memfold ui` for a new one."
        } else {
            "Wrong token."
        };
        let page = LoginPage { css: CSS_PATH, code: None, message: Some(message.into()) };
        return (StatusCode::FORBIDDEN, page).into_response();
    }
    let (id, _) = ui.sessions.create();
    let mut response = Redirect::to("/ui").into_response();
    response.headers_mut().append(header::SET_COOKIE, session_cookie(&ui, &id));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory text and LLM output are untrusted: no template may turn escaping off or carry a
    /// script of its own (the CSP would block an inline one anyway).
    #[test]
    fn templates_escape_everything_and_carry_no_script() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/ui");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for banned in ["|safe", "| safe", "escape = \"none\"", "<script", " on", "javascript:"] {
                let hit = match banned {
                    // An inline event handler attribute, such as onclick=.
                    " on" => text.match_indices(" on").any(|(at, _)| {
                        text[at + 3..].chars().take_while(|c| c.is_ascii_alphabetic()).count() > 0
                            && text[at + 3..].trim_start_matches(|c: char| c.is_ascii_alphabetic()).starts_with('=')
                    }),
                    _ => text.contains(banned),
                };
                assert!(!hit, "{} contains {banned:?}", path.display());
            }
            seen += 1;
        }
        assert!(seen >= 10, "the templates were found");
    }

    #[test]
    fn only_known_outcomes_are_shown_after_a_redirect() {
        let done = |d: &str, run: &str| Done { done: Some(d.into()), run: Some(run.into()), n: None }.message();
        assert_eq!(done("undone", "r-20260101T000000Z-0001").as_deref(), Some("Run r-20260101T000000Z-0001 undone."));
        assert_eq!(done("<b>hi</b>", "r-1"), None);
        assert_eq!(done("undone", "<script>"), None, "a run id that is not one is not shown");
        assert_eq!(ago(Utc::now() - chrono::Duration::minutes(90)), "1 h ago");
    }
}
