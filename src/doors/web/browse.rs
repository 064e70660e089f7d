//! The review page's other pages: applied runs (and their undo), an entry with its versions (pin,
//! unpin, forget), one archived fact, and search.

use crate::doors::http::status_of;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::Query;
use axum::response::{IntoResponse, Redirect, Response};
use memfold_core::memory::views::{FactView, Version};
use memfold_core::memory::{SearchRequest, Undo};
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
    /// Ops undone one by one, as "ops 2, 5".
    undone_ops: String,
    notes: Vec<String>,
}

impl RunRow {
    fn from(r: memfold_core::memory::views::RunView) -> RunRow {
        RunRow {
            time: r.time.to_rfc3339(),
            when: format!("{} ({})", r.time.format("%Y-%m-%d %H:%M"), ago(r.time)),
            plan: r.plan,
            ops: match &r.verb {
                Some(verb) => format!("{verb}: {}", kinds(&r.ops)),
                None => kinds(&r.ops),
            },
            facts: r.facts,
            llm: r.llm.map_or(String::new(), |u| format!("{} calls", u.calls)),
            undone: r.undone.map(|t| t.format("%Y-%m-%d %H:%M").to_string()),
            undone_ops: match r.undone_ops.as_slice() {
                [] => String::new(),
                ops => format!("ops {} undone", ops.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
            },
            notes: r.notes,
            run: r.run,
        }
    }
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
            let runs = runs.into_iter().rev().map(RunRow::from).collect();
            RunsPage { nav, runs, alert }.into_response()
        }
        Err(e) => error_page(&e, session, "Runs"),
    }
}

pub(super) async fn runs(session: axum::Extension<Session>, done: Query<Done>) -> Response {
    runs_page(&session, Nav::new("runs", &session, &done), None).await
}

/// One op line of a run's page, with whether it was undone already.
pub(super) struct RunOpRow {
    seq: usize,
    label: String,
    undone: bool,
}

pub(super) struct RunGroupRow {
    group: usize,
    ops: Vec<RunOpRow>,
    entries: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/run.html")]
pub(super) struct RunPage {
    nav: Nav,
    row: RunRow,
    groups: Vec<RunGroupRow>,
    alert: Option<Alert>,
}

pub(super) async fn run_page(session: &Session, id: &str, nav: Nav, alert: Option<Alert>) -> Response {
    match session.service.run(DOOR, id).await {
        Ok(detail) => {
            let undone = detail.run.undone_ops.clone();
            let groups = detail
                .groups
                .iter()
                .map(|g| RunGroupRow {
                    group: g.group,
                    ops: g
                        .ops
                        .iter()
                        .map(|op| RunOpRow {
                            seq: op.seq,
                            label: crate::doors::render::op_label(&op.op),
                            undone: undone.contains(&op.seq),
                        })
                        .collect(),
                    entries: g.entries.clone(),
                })
                .collect();
            RunPage { nav, row: RunRow::from(detail.run), groups, alert }.into_response()
        }
        Err(e) => error_page(&e, session, "Run"),
    }
}

pub(super) async fn run(session: axum::Extension<Session>, Id(id): Id, done: Query<Done>) -> Response {
    run_page(&session, &id, Nav::new("runs", &session, &done), None).await
}

/// Undo a whole run, or the ops and groups checked on its page.
pub(super) async fn undo(session: axum::Extension<Session>, Id(run): Id, CheckedForm(fields): CheckedForm) -> Response {
    let numbers = |name: &str| -> Vec<usize> {
        fields.iter().filter(|(k, _)| k == name).filter_map(|(_, v)| v.parse().ok()).collect()
    };
    let note = filled(&fields, "note");
    let what = Undo { ops: numbers("op"), groups: numbers("group"), note: note.map(str::to_string) };
    let from_page = field(&fields, "from") == Some("run");
    match session.service.undo(DOOR, &run, &what).await {
        Ok(undone) if from_page => Redirect::to(&format!(
            "{}/runs/{}?done=undone&run={}&n={}",
            session.base,
            undone.run,
            undone.run,
            undone.ops.len()
        ))
        .into_response(),
        Ok(undone) => Redirect::to(&format!("{}/runs?done=undone&run={}", session.base, undone.run)).into_response(),
        Err(e) => {
            let alert = Some(Alert::from(&e));
            let mut response = if from_page {
                run_page(&session, &run, Nav::new("runs", &session, &Done::default()), alert).await
            } else {
                runs_page(&session, Nav::new("runs", &session, &Done::default()), alert).await
            };
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
    /// Secrets shown as they are stored (asked for with `?reveal=true`), else masked.
    reveal: bool,
    /// Whether a version holds a secret (the page offers to show it).
    secret: bool,
    /// The names the current text speaks of (each a page), and the entries it is linked to.
    names: Vec<String>,
    related: Vec<memfold_core::memory::views::Link>,
}

pub(super) async fn entry_page(session: &Session, id: &str, nav: Nav, alert: Option<Alert>) -> Response {
    entry_page_revealed(session, id, nav, alert, false).await
}

async fn entry_page_revealed(session: &Session, id: &str, nav: Nav, alert: Option<Alert>, reveal: bool) -> Response {
    let chain = match session.service.history(DOOR, id).await {
        Ok(chain) => chain,
        Err(e) => return error_page(&e, session, "Entry"),
    };
    let current = chain.versions.iter().find(|v| v.id == id && v.status.is_current());
    let (current, pinned) = (current.map(|v| v.content.clone()), current.is_some_and(|v| v.pinned));
    let secret = chain.versions.iter().any(|v| !memfold_core::memory::text::find_secrets(&v.content).is_empty());
    let mut names: Vec<String> = Vec::new();
    // From the masked text: a secret is never a name, nor a link to one.
    let masked = current.as_deref().map(memfold_core::memory::text::mask).unwrap_or_default();
    for (name, _) in memfold_core::memory::text::proper_names(&masked) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let related = match current {
        Some(_) => session.service.entry(DOOR, id).await.map(|e| e.related).unwrap_or_default(),
        None => Vec::new(),
    };
    EntryPage {
        nav,
        id: id.to_string(),
        current,
        pinned,
        versions: chain.versions,
        alert,
        reveal,
        secret,
        names,
        related,
    }
    .into_response()
}

pub(super) async fn entry(session: axum::Extension<Session>, Id(id): Id, done: Query<Done>) -> Response {
    entry_page_revealed(&session, &id, Nav::new("", &session, &done), None, done.reveal).await
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
    let reason = filled(&fields, "reason");
    match session.service.forget(DOOR, &id, reason).await {
        Ok(_) => Redirect::to(&format!("{}?done=forgotten", session.base)).into_response(),
        Err(e) => error_page(&e, &session, "Forget"),
    }
}

/// Merge the entry with the entries named in `with` (ids separated by spaces or commas).
pub(super) async fn merge(session: axum::Extension<Session>, Id(id): Id, CheckedForm(fields): CheckedForm) -> Response {
    let with = field(&fields, "with").unwrap_or("");
    let mut ids = vec![id.clone()];
    ids.extend(with.split([' ', ',']).map(str::trim).filter(|w| !w.is_empty()).map(str::to_string));
    match session.service.merge(DOOR, &ids, filled(&fields, "text"), filled(&fields, "note")).await {
        Ok(done) => curated(&session, &done, "merged"),
        Err(e) => entry_refused(&session, &id, &e).await,
    }
}

/// Supersede the entry by the entry named in `with`, or by `text`.
pub(super) async fn supersede(
    session: axum::Extension<Session>,
    Id(id): Id,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let (with, text) = (filled(&fields, "with").map(str::to_string), filled(&fields, "text").map(str::to_string));
    let by = match memfold_core::memory::requests::successor(with, text) {
        Ok(by) => by,
        Err(e) => return entry_refused(&session, &id, &e).await,
    };
    match session.service.supersede(DOOR, &id, by, filled(&fields, "note")).await {
        Ok(done) => curated(&session, &done, "superseded"),
        Err(e) => entry_refused(&session, &id, &e).await,
    }
}

fn curated(session: &Session, done: &memfold_core::memory::views::Curated, what: &str) -> Response {
    Redirect::to(&format!("{}/entries/{}?done={what}&run={}", session.base, done.entry, done.run)).into_response()
}

/// The entry's page again, with why the change was refused, under the error's status.
async fn entry_refused(session: &Session, id: &str, e: &Error) -> Response {
    let mut response = entry_page(session, id, Nav::new("", session, &Done::default()), Some(Alert::from(e))).await;
    *response.status_mut() = status_of(e.kind());
    response
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/fact.html")]
pub(super) struct FactPage {
    nav: Nav,
    fact: FactView,
    fate: &'static str,
    /// Secrets shown as they are stored (asked for with `?reveal=true`), else masked.
    reveal: bool,
    secret: bool,
}

pub(super) async fn fact(session: axum::Extension<Session>, Id(id): Id, done: Query<Done>) -> Response {
    match session.service.fact(DOOR, &id).await {
        Ok(fact) => {
            let fate = match fact.fate {
                memfold_core::memory::views::FactFate::Pending => "Pending: no entry holds it yet",
                memfold_core::memory::views::FactFate::Consolidated => "Consolidated",
                memfold_core::memory::views::FactFate::Tombstoned => "Tombstoned: forgotten by a person",
                memfold_core::memory::views::FactFate::Retired => {
                    "Retired: its entry went unused and was retired (in history)"
                }
            };
            let secret = [Some(&fact.fact.text), fact.fact.src.as_ref()]
                .into_iter()
                .flatten()
                .any(|t| !memfold_core::memory::text::find_secrets(t).is_empty());
            FactPage { nav: Nav::new("", &session, &Done::default()), fact, fate, reveal: done.reveal, secret }
                .into_response()
        }
        Err(e) => error_page(&e, &session, "Fact"),
    }
}

// ---- names ------------------------------------------------------------------------------------

#[derive(Template, WebTemplate)]
#[template(path = "ui/about.html")]
pub(super) struct AboutPage {
    nav: Nav,
    /// One name's entries; None: the list of names.
    about: Option<memfold_core::memory::views::About>,
    names: Vec<memfold_core::memory::views::Named>,
}

/// The names memory speaks of, each with how many entries name it.
pub(super) async fn names(session: axum::Extension<Session>) -> Response {
    let nav = Nav::new("about", &session, &Done::default());
    match session.service.about(DOOR, None, false).await {
        Ok(memfold_core::memory::views::AboutAnswer::Names { names }) => {
            AboutPage { nav, about: None, names }.into_response()
        }
        Ok(memfold_core::memory::views::AboutAnswer::About(about)) => {
            AboutPage { nav, about: Some(about), names: Vec::new() }.into_response()
        }
        Err(e) => error_page(&e, &session, "Names"),
    }
}

/// What memory holds about one name, and what was true before.
pub(super) async fn about(session: axum::Extension<Session>, Id(name): Id) -> Response {
    let nav = Nav::new("about", &session, &Done::default());
    match session.service.about(DOOR, Some(&name), true).await {
        Ok(memfold_core::memory::views::AboutAnswer::About(about)) => {
            AboutPage { nav, about: Some(about), names: Vec::new() }.into_response()
        }
        Ok(memfold_core::memory::views::AboutAnswer::Names { names }) => {
            AboutPage { nav, about: None, names }.into_response()
        }
        Err(e) => error_page(&e, &session, "About"),
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
                        (None, memfold_core::memory::views::DocKind::Fact) => {
                            Some(format!("{}/facts/{}", session.base, h.id))
                        }
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
