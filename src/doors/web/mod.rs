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

mod browse;
mod plans;
pub mod session;
/// The templates' own filters.
pub(super) mod filters {
    /// Memory text as the page shows it: every secret masked by its marker, unless the person
    /// asked to see them (`?reveal=true` on an entry's or a fact's page).
    #[askama::filter_fn]
    pub fn masked(text: impl ToString, _: &dyn askama::Values, reveal: bool) -> askama::Result<String> {
        let text = text.to_string();
        Ok(if reveal { text } else { memfold_core::memory::text::mask(&text) })
    }
}

#[cfg(test)]
mod tests;

use browse::{about, entry, fact, forget, forget_page, merge, names, pin, run, runs, search, supersede, undo, unpin};
use plans::{decide, inbox, plan, plan_diff};

use std::collections::BTreeMap;
use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Form, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use cookie::{Cookie, SameSite};
use serde::Deserialize;

use crate::doors::http::status_of;
use crate::service::{Access, Door, Service, Spaces};
use memfold_core::error::Error;
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
    spaces: Arc<Spaces>,
    sessions: Arc<Sessions>,
    /// `memfold-<port>`: two daemons on one machine keep their sessions apart.
    cookie: Arc<str>,
}

/// The signed-in session of a request and the space its page is about, put there by
/// [`signed_in`]: a space's sign-in reaches that space at `/ui/…`; a home's operator picks a
/// space and reaches it at `/ui/s/<name>/…`.
#[derive(Clone)]
struct Session {
    csrf: String,
    service: Arc<Service>,
    /// Where the space's pages are: `/ui` or `/ui/s/<name>`.
    base: String,
}

/// The `{id}` of a page's path, at `/ui/…` and at `/ui/s/{space}/…` alike.
pub(super) struct Id(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Id {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Id, Response> {
        let axum::extract::Path(mut params) =
            axum::extract::Path::<std::collections::HashMap<String, String>>::from_request_parts(parts, state)
                .await
                .map_err(IntoResponse::into_response)?;
        params.remove("id").map(Id).ok_or_else(|| StatusCode::NOT_FOUND.into_response())
    }
}

/// The routes under `/ui` (nest them there), for a server on `port` over `spaces`.
pub fn router(spaces: Arc<Spaces>, port: u16) -> Router {
    let ui = Ui { spaces, sessions: Arc::default(), cookie: Arc::from(format!("memfold-{port}")) };
    let pages: Router<Ui> = Router::new()
        .route("/", get(inbox))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/diff", get(plan_diff))
        .route("/plans/{id}/decide", post(decide))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route("/runs/{id}/undo", post(undo))
        .route("/entries/{id}", get(entry))
        .route("/entries/{id}/pin", post(pin))
        .route("/entries/{id}/unpin", post(unpin))
        .route("/entries/{id}/forget", get(forget_page).post(forget))
        .route("/entries/{id}/merge", post(merge))
        .route("/entries/{id}/supersede", post(supersede))
        .route("/facts/{id}", get(fact))
        .route("/search", get(search))
        .route("/about", get(names))
        .route("/about/{id}", get(about));
    let pages = Router::new()
        .merge(pages.clone())
        .nest("/s/{space}", pages)
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
    let sent = headers.get_all(header::COOKIE).into_iter().filter_map(|v| v.to_str().ok());
    sent.flat_map(Cookie::split_parse).flatten().find(|c| c.name() == name).map(|c| c.value().to_string())
}

fn session_cookie(ui: &Ui, id: &str) -> HeaderValue {
    let max_age = cookie::time::Duration::seconds(session::SESSION_IDLE.as_secs() as i64);
    let cookie = Cookie::build((ui.cookie.to_string(), id.to_string()))
        .path("/ui")
        .http_only(true)
        .same_site(SameSite::Strict)
        .max_age(max_age)
        .build();
    HeaderValue::from_str(&cookie.to_string()).expect("hex ids make a valid header")
}

/// Let signed-in browsers through to their space's pages (and, on a server without a token,
/// sign a new one in); send the others to the sign-in page. A space's session may not name a
/// space (`/ui/s/…`: 403); an operator's must, and is shown the spaces to pick from otherwise.
async fn signed_in(State(ui): State<Ui>, mut request: Request, next: Next) -> Response {
    let known = cookie_value(request.headers(), &ui.cookie).and_then(|id| ui.sessions.get(&id));
    let (csrf, access, new) = match known {
        Some((csrf, access)) => (csrf, access, None),
        None if !ui.spaces.keys().needs_token() => {
            let access = Access::Space(String::new());
            let (id, csrf) = ui.sessions.create(access.clone());
            (csrf, access, Some(id))
        }
        None => return Redirect::to("/ui/login").into_response(),
    };
    let named = request.uri().path().strip_prefix("/s/").map(|rest| rest.split('/').next().unwrap_or("").to_string());
    let space = match (access, named.clone()) {
        (Access::Space(_), Some(_)) => {
            let message = "This sign-in reaches its own space only; sign in with the home's code to pick a space.";
            return (StatusCode::FORBIDDEN, Html(format!("<!doctype html><title>Refused</title><p>{message}</p>")))
                .into_response();
        }
        (Access::Space(own), None) => own,
        (Access::Operator, Some(name)) => name,
        // The operator's pages are a space's: any other page shows the spaces to pick from.
        (Access::Operator, None) => return picker(&ui).await,
    };
    let base = named.map_or_else(|| "/ui".to_string(), |name| format!("/ui/s/{name}"));
    let service = match ui.spaces.service(&space, false).await {
        Ok(service) => service,
        Err(e) => {
            let message = askama::filters::escape(e.to_string(), askama::filters::Html)
                .map(|m| m.to_string())
                .unwrap_or_default();
            return (status_of(e.kind()), Html(format!("<!doctype html><title>Unavailable</title><p>{message}</p>")))
                .into_response();
        }
    };
    request.extensions_mut().insert(Session { csrf, service, base });
    let mut response = next.run(request).await;
    if let Some(id) = new {
        response.headers_mut().append(header::SET_COOKIE, session_cookie(&ui, &id));
    }
    response
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/spaces.html")]
struct PickerPage {
    css: &'static str,
    spaces: Vec<crate::service::SpaceSummary>,
}

/// The operator's first page: the home's spaces, each a link to its pages.
async fn picker(ui: &Ui) -> Response {
    PickerPage { css: CSS_PATH, spaces: ui.spaces.summaries().await }.into_response()
}

// ---- pieces every page has --------------------------------------------------------------------

/// The frame of a page: the navigation, the session's CSRF token, where the space's pages are,
/// a message after an action.
struct Nav {
    current: &'static str,
    csrf: String,
    css: &'static str,
    base: String,
    /// The space, for a home's pages.
    space: String,
    flash: Option<String>,
}

impl Nav {
    fn new(current: &'static str, session: &Session, done: &Done) -> Nav {
        Nav {
            current,
            csrf: session.csrf.clone(),
            css: CSS_PATH,
            base: session.base.clone(),
            space: session.service.name().to_string(),
            flash: done.message(),
        }
    }
}

/// What the action before a redirect did (`?done=…&run=…`); only known words are shown.
#[derive(Debug, Default, Deserialize)]
struct Done {
    done: Option<String>,
    run: Option<String>,
    n: Option<usize>,
    /// Show the secrets a page's memory text holds, which it masks otherwise.
    #[serde(default)]
    reveal: bool,
}

impl Done {
    fn message(&self) -> Option<String> {
        let run = self.run.as_deref().filter(|r| memfold_core::memory::text::check_id("run", r).is_ok());
        Some(match (self.done.as_deref()?, run) {
            ("applied", Some(run)) => match self.n {
                Some(n) if n > 0 => {
                    format!("Applied as run {run}; the other groups were rejected, their {n} facts are pending again.")
                }
                _ => format!("Applied as run {run}."),
            },
            ("rejected", _) => "Rejected: its facts are pending again.".into(),
            ("undone", Some(run)) => match self.n {
                Some(n) if n > 0 => format!("{n} ops of run {run} undone."),
                _ => format!("Run {run} undone."),
            },
            ("merged", Some(run)) => format!("Merged as run {run}; the old entries are in history."),
            ("superseded", Some(run)) => format!("Superseded as run {run}; the old entry is in history."),
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
            memfold_core::error::Kind::Busy => format!("A consolidation pass is running; try again in a moment. ({e})"),
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
    let minutes = (memfold_store::sys::clock::now() - when).num_minutes().max(0);
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

/// A form field as written, trimmed, when something was written in it.
fn filled<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    field(fields, name).map(str::trim).filter(|v| !v.is_empty())
}

// ---- inbox ------------------------------------------------------------------------------------

#[derive(Template, WebTemplate)]
#[template(path = "ui/login.html")]
struct LoginPage {
    css: &'static str,
    code: Option<String>,
    /// The space whose code it is ("" for a lone root's or a home operator's).
    space: String,
    message: Option<String>,
}

#[derive(Deserialize)]
struct LoginParams {
    code: Option<String>,
    space: Option<String>,
}

/// Shows a button; opening the address does not use the code up (link previews and
/// prefetchers open addresses too).
async fn login_page(Query(params): Query<LoginParams>) -> Response {
    let code = params.code.filter(|c| !c.is_empty() && c.len() <= 128);
    let space = params.space.filter(|s| memfold_core::memory::text::check_name(s).is_ok()).unwrap_or_default();
    LoginPage { css: CSS_PATH, code, space, message: None }.into_response()
}

async fn login(State(ui): State<Ui>, Form(fields): Form<Vec<(String, String)>>) -> Response {
    // A code is looked up among the codes of the space it names (or the root's or home's):
    // naming another space finds no code there.
    let by_code = match field(&fields, "code") {
        Some(code) => ui.spaces.keys().sign_in(field(&fields, "space").unwrap_or(""), code).await,
        None => None,
    };
    let by_token = field(&fields, "token").and_then(|given| ui.spaces.keys().access(Some(given)));
    let Some(access) = by_code.or(by_token) else {
        let message = if field(&fields, "code").is_some() {
            "That sign-in address was used already or is more than 2 minutes old: run `memfold ui` for a new one."
        } else {
            "Wrong token."
        };
        let page = LoginPage { css: CSS_PATH, code: None, space: String::new(), message: Some(message.into()) };
        return (StatusCode::FORBIDDEN, page).into_response();
    };
    let (id, _) = ui.sessions.create(access);
    let mut response = Redirect::to("/ui").into_response();
    response.headers_mut().append(header::SET_COOKIE, session_cookie(&ui, &id));
    response
}
