//! The review page's other pages: applied runs (and their undo), an entry with its versions (pin,
//! unpin, forget), one archived fact, and search.

use crate::doors::http::status_of;
use crate::memory::views::{FactView, Version};
use crate::memory::{SearchRequest, Undo};
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::Query;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::*;

pub(super) struct RunRow {
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
pub(super) struct RunsPage {
    nav: Nav,
    runs: Vec<RunRow>,
    alert: Option<Alert>,
}

pub(super) async fn runs_page(session: &Session, nav: Nav, alert: Option<Alert>) -> Response {
    match session.service.runs(DOOR).await {
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
        Err(e) => error_page(&e, session, "Runs"),
    }
}

pub(super) async fn runs(session: axum::Extension<Session>, done: Query<Done>) -> Response {
    runs_page(&session, Nav::new("runs", &session, &done), None).await
}

pub(super) async fn undo(session: axum::Extension<Session>, Id(run): Id, CheckedForm(fields): CheckedForm) -> Response {
    let numbers = |name: &str| -> Vec<usize> {
        fields.iter().filter(|(k, _)| k == name).filter_map(|(_, v)| v.parse().ok()).collect()
    };
    let note = fields.iter().find(|(k, _)| k == "note").map(|(_, v)| v.trim().to_string()).filter(|n| !n.is_empty());
    let what = Undo { ops: numbers("op"), groups: numbers("group"), note };
    match session.service.undo(DOOR, &run, &what).await {
        Ok(undone) => Redirect::to(&format!("{}/runs?done=undone&run={}", session.base, undone.run)).into_response(),
        Err(e) => {
            let mut response =
                runs_page(&session, Nav::new("runs", &session, &Done::default()), Some(Alert::from(&e))).await;
            *response.status_mut() = status_of(e.kind());
            response
        }
    }
}

// ---- entries and facts ------------------------------------------------------------------------

#[derive(Template, WebTemplate)]
#[template(path = "ui/entry.html")]
pub(super) struct EntryPage {
    nav: Nav,
    id: String,
    current: Option<String>,
    pinned: bool,
    versions: Vec<Version>,
    alert: Option<Alert>,
}

pub(super) async fn entry_page(session: &Session, id: &str, nav: Nav, alert: Option<Alert>) -> Response {
    let chain = match session.service.history(DOOR, id).await {
        Ok(chain) => chain,
        Err(e) => return error_page(&e, session, "Entry"),
    };
    let current = chain.versions.iter().find(|v| v.id == id && v.status.is_current());
    let (current, pinned) = (current.map(|v| v.content.clone()), current.is_some_and(|v| v.pinned));
    EntryPage { nav, id: id.to_string(), current, pinned, versions: chain.versions, alert }.into_response()
}

pub(super) async fn entry(session: axum::Extension<Session>, Id(id): Id, done: Query<Done>) -> Response {
    entry_page(&session, &id, Nav::new("", &session, &done), None).await
}

pub(super) async fn set_pin(session: &Session, id: &str, pinned: bool) -> Response {
    match session.service.pin(DOOR, id, pinned).await {
        Ok(_) => {
            let done = if pinned { "pinned" } else { "unpinned" };
            Redirect::to(&format!("{}/entries/{id}?done={done}", session.base)).into_response()
        }
        Err(e) => error_page(&e, session, "Entry"),
    }
}

pub(super) async fn pin(session: axum::Extension<Session>, Id(id): Id, _: CheckedForm) -> Response {
    set_pin(&session, &id, true).await
}

pub(super) async fn unpin(session: axum::Extension<Session>, Id(id): Id, _: CheckedForm) -> Response {
    set_pin(&session, &id, false).await
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/forget.html")]
pub(super) struct ForgetPage {
    nav: Nav,
    id: String,
    content: String,
}

pub(super) async fn forget_page(session: axum::Extension<Session>, Id(id): Id) -> Response {
    match session.service.entry(DOOR, &id).await {
        Ok(entry) => {
            ForgetPage { nav: Nav::new("", &session, &Done::default()), id, content: entry.content }.into_response()
        }
        Err(e) => error_page(&e, &session, "Forget"),
    }
}

pub(super) async fn forget(
    session: axum::Extension<Session>,
    Id(id): Id,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let reason = field(&fields, "reason").map(str::trim).filter(|r| !r.is_empty());
    match session.service.forget(DOOR, &id, reason).await {
        Ok(_) => Redirect::to(&format!("{}?done=forgotten", session.base)).into_response(),
        Err(e) => error_page(&e, &session, "Forget"),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/fact.html")]
pub(super) struct FactPage {
    nav: Nav,
    fact: FactView,
    fate: &'static str,
}

pub(super) async fn fact(session: axum::Extension<Session>, Id(id): Id) -> Response {
    match session.service.fact(DOOR, &id).await {
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

pub(super) struct HitRow {
    kind: &'static str,
    id: String,
    /// None for a hit from a shared space.
    link: Option<String>,
    text: String,
    /// The shared space the hit came from (None: this space).
    space: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/search.html")]
pub(super) struct SearchPage {
    nav: Nav,
    q: String,
    searched: bool,
    hits: Vec<HitRow>,
}

#[derive(Deserialize)]
pub(super) struct SearchParams {
    q: Option<String>,
}

/// A person browsing: the hits are not recorded in the recall log.
pub(super) async fn search(session: axum::Extension<Session>, Query(params): Query<SearchParams>) -> Response {
    let q = params.q.unwrap_or_default();
    let nav = Nav::new("search", &session, &Done::default());
    if q.trim().is_empty() {
        return SearchPage { nav, q, searched: false, hits: Vec::new() }.into_response();
    }
    let request = SearchRequest { k: Some(20), skip_recall: true, ..SearchRequest::default() };
    match session.service.search(DOOR, &q, &request).await {
        Ok(hits) => {
            let hits = hits
                .into_iter()
                .map(|h| {
                    let kind = h.kind.as_str();
                    // A shared space's hit is named, not linked: its pages are that space's.
                    let elsewhere = h.space.filter(|space| space != session.service.name());
                    let link = match (&elsewhere, h.kind) {
                        (Some(_), _) => None,
                        (None, crate::index::DocKind::Fact) => Some(format!("{}/facts/{}", session.base, h.id)),
                        (None, _) => Some(format!("{}/entries/{}", session.base, h.id)),
                    };
                    HitRow { kind, id: h.id, link, text: h.text, space: elsewhere }
                })
                .collect();
            SearchPage { nav, q, searched: true, hits }.into_response()
        }
        Err(e) => error_page(&e, &session, "Search"),
    }
}

// ---- sign-in ----------------------------------------------------------------------------------
