//! The review page's plans: the inbox of plans waiting, one plan by op group with each entry
//! before and after, its diff, and the form that applies or rejects it.

use crate::doors::http::status_of;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::Query;
use axum::response::{IntoResponse, Redirect, Response};
use memfold_core::error::Error;
use memfold_core::memory::views::PlanDetail;
use serde::Deserialize;
use std::collections::BTreeMap;

use super::*;

pub(super) struct PlanRow {
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
pub(super) struct InboxPage {
    nav: Nav,
    status: memfold_core::memory::views::Status,
    plans: Vec<PlanRow>,
    rejected: usize,
}

pub(super) async fn inbox(session: axum::Extension<Session>, done: Query<Done>) -> Response {
    let service = &session.service;
    let (status, plans) = match (service.status(DOOR).await, service.plans(DOOR).await) {
        (Ok(status), Ok(plans)) => (status.status, plans),
        (Err(e), _) | (_, Err(e)) => return error_page(&e, &session, "Inbox"),
    };
    let rejected = plans.iter().filter(|p| p.status == memfold_core::memory::views::PlanStatus::Rejected).count();
    let plans = plans
        .into_iter()
        .filter(|p| p.status == memfold_core::memory::views::PlanStatus::Pending)
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

pub(super) struct FactRow {
    id: String,
    date: String,
    when: String,
    src: Option<String>,
    text: String,
}

pub(super) struct ChangeRow {
    entry: String,
    before: String,
    after: String,
    runs: Vec<memfold_core::memory::text::WordRun>,
    /// What changed besides the text (sources, dates), in words.
    notes: String,
}

pub(super) struct OpRow {
    kind: &'static str,
    target: Option<String>,
    into: Option<String>,
    why: Option<String>,
    signals: String,
    confidence: Option<String>,
    changes: Vec<ChangeRow>,
}

pub(super) struct GroupRow {
    group: usize,
    facts: Vec<FactRow>,
    ops: Vec<OpRow>,
    left_alone: Vec<memfold_core::memory::views::SeenEntry>,
    /// The group in a line: its ops and their targets.
    summary: String,
    /// The lowest confidence of its ops, when the decider gave one.
    confidence: Option<String>,
}

/// Groups shown in full on one plan page; every group has its row in the form on every page,
/// so a large plan is decided on any of its pages and each page stays small.
pub(super) const GROUPS_PER_PAGE: usize = 8;

/// `?from=N`: the first group shown in full.
#[derive(Deserialize, Default)]
pub(super) struct Window {
    from: Option<usize>,
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/plan.html")]
pub(super) struct PlanPage {
    nav: Nav,
    id: String,
    headline: String,
    stale: bool,
    pending: bool,
    rejected: Option<String>,
    /// Why it was applied or rejected, as the person wrote it.
    note: Option<String>,
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
        format!("{}/plans/{}?from={}#g{n}", self.nav.base, self.id, (n - 1) / GROUPS_PER_PAGE * GROUPS_PER_PAGE + 1)
    }
}

pub(super) fn change_row(c: &memfold_core::memory::views::EntryChange) -> ChangeRow {
    let parts = |block: Option<&str>| block.map(memfold_core::memory::text::entry_parts).unwrap_or_default();
    let (before, after) = (parts(c.before.as_deref()), parts(c.after.as_deref()));
    let added: Vec<&String> = after.sources.iter().filter(|s| !before.sources.contains(s)).collect();
    let mut notes = Vec::new();
    if !added.is_empty() {
        notes.push(format!("sources added: {}", added.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")));
    }
    if c.after.is_some() && !after.dates.is_empty() {
        notes.push(after.dates);
    }
    ChangeRow {
        entry: c.entry.clone(),
        runs: memfold_core::memory::text::words(&before.content, &after.content),
        before: before.content,
        after: after.content,
        notes: notes.join("; "),
    }
}

pub(super) fn plan_page(detail: PlanDetail, from: Option<usize>, nav: Nav, alert: Option<Alert>) -> PlanPage {
    let facts: BTreeMap<&str, &memfold_core::memory::views::Fact> =
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
        pending: plan.status == memfold_core::memory::views::PlanStatus::Pending,
        rejected: plan.rejected.map(|t| t.to_rfc3339()),
        note: plan.note.clone(),
        groups,
        shown: (start.min(end), end),
        pages,
        alert,
    }
}

pub(super) async fn plan(
    session: axum::Extension<Session>,
    Id(id): Id,
    done: Query<Done>,
    window: Query<Window>,
) -> Response {
    match session.service.plan(DOOR, &id).await {
        Ok(detail) => plan_page(detail, window.from, Nav::new("inbox", &session, &done), None).into_response(),
        Err(e) => error_page(&e, &session, "Plan"),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "ui/plan_diff.html")]
pub(super) struct PlanDiffPage {
    nav: Nav,
    id: String,
    diff: String,
}

/// A plan's whole change to `memory.md` as a unified diff.
pub(super) async fn plan_diff(session: axum::Extension<Session>, Id(id): Id) -> Response {
    match session.service.plan(DOOR, &id).await {
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
pub(super) async fn decide(
    session: axum::Extension<Session>,
    Id(id): Id,
    CheckedForm(fields): CheckedForm,
) -> Response {
    let note = filled(&fields, "note");
    let result = match field(&fields, "action") {
        Some("reject") => {
            session.service.reject_plan(DOOR, &id, note).await.map(|_| format!("{}?done=rejected", session.base))
        }
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
                Ok(groups) => session
                    .service
                    .apply_plan(DOOR, &id, groups, note)
                    .await
                    .map(|a| format!("{}/runs?done=applied&run={}&n={}", session.base, a.run, a.rejected.len())),
                Err(e) => Err(e),
            }
        }
        _ => Err(Error::BadInput("unknown action".into())),
    };
    match result {
        Ok(to) => Redirect::to(&to).into_response(),
        // Shown on the plan itself, with the entries in the way linked.
        Err(e) => match session.service.plan(DOOR, &id).await {
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
