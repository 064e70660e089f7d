//! The compact text an MCP tool answers with: what an agent reads, one line per item.
//!
//! The structured content of every answer carries the CLI's `--json` document; this text says
//! the same in fewer words, names ids so the agent can act on them, and names the tool that
//! takes the next step. Multi-line entry text is folded onto its line.

use std::fmt::Write;

use crate::memory::views::{
    Added, AppliedPlan, Chain, Forgotten, Hit, OpReport, PassReport, PlanDetail, PlanStatus, PlanView, RejectedPlan,
    RunView, Status, Undone,
};

/// Text on one line.
fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A list of ids, or `none`.
fn ids(ids: &[String]) -> String {
    if ids.is_empty() { "none".to_string() } else { ids.join(", ") }
}

/// Facts just stored.
pub fn stored(added: &Added) -> String {
    let facts = &added.facts;
    if facts.is_empty() {
        return "nothing in the turn was worth remembering; nothing was stored".to_string();
    }
    let mut out = format!("stored {} fact{} (searchable now):", facts.len(), plural(facts.len()));
    for f in facts {
        let _ = write!(out, "\n{} {} {}", f.id, f.date, folded(&f.text));
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Search hits, best first.
pub fn hits(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return "no hits".to_string();
    }
    let lines: Vec<String> = hits
        .iter()
        .map(|h| {
            let when = match h.valid_until {
                Some(until) => format!(", {} to {until}", h.valid_from),
                None => format!(", {}", h.valid_from),
            };
            format!("{} [{}{when}] {}", h.id, h.kind.as_str(), folded(&h.text))
        })
        .collect();
    lines.join("\n")
}

/// An entry's versions: the current one first, then the older ones and those merged into it.
pub fn chain(chain: &Chain) -> String {
    let mut out = String::new();
    let current = chain.versions.iter().filter(|v| v.status.is_current());
    let older = chain.versions.iter().filter(|v| !v.status.is_current());
    for v in current.chain(older) {
        let date = |d: Option<chrono::NaiveDate>| d.map_or("?".to_string(), |d| d.to_string());
        let mut notes = vec![v.status.to_string()];
        if v.pinned {
            notes.push("pinned".into());
        }
        notes.push(format!("first seen {}", date(v.first_seen)));
        notes.push(format!("updated {}", date(v.updated)));
        if let Some(until) = v.valid_until {
            notes.push(format!("until {until}"));
        }
        if let Some(next) = &v.superseded_by {
            notes.push(format!("superseded by {next}"));
        }
        if !v.supersedes.is_empty() {
            notes.push(format!("supersedes {}", v.supersedes.join(", ")));
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = write!(out, "{} ({}): {}", v.id, notes.join(", "), folded(&v.content));
    }
    out
}

pub fn forgotten(done: &Forgotten) -> String {
    format!("forgot {} {}; it will not come back (tombstoned: {})", done.kind, done.id, ids(&done.tombstoned))
}

pub fn pinned(id: &str, pinned: bool) -> String {
    if pinned {
        format!("pinned {id}: consolidation will never replace or remove it")
    } else {
        format!("unpinned {id}")
    }
}

fn op(op: &OpReport) -> String {
    let target = op.target.as_deref().unwrap_or("(new)");
    let what = match (&op.content, &op.into) {
        (Some(content), _) => folded(content),
        (None, Some(into)) => format!("into {into}"),
        (None, None) => format!("facts {}", op.facts.join(", ")),
    };
    format!("{} {target} {what}", op.op)
}

/// What a pass did, would do (dry run), or why it did not start.
pub fn pass(report: &PassReport) -> String {
    if !report.gate.open {
        return format!(
            "not consolidating: {} (memory_consolidate with force = true skips min_hours and min_facts)",
            report.gate.reason
        );
    }
    let mut lines: Vec<String> = report.ops.iter().map(op).collect();
    lines.push(format!("run {}", report.summary()));
    for plan in &report.plans {
        lines.push(format!(
            "plan {plan} stored for review: memory_plans shows it, memory_apply_plan or memory_reject_plan decides it"
        ));
    }
    lines.join("\n")
}

pub fn status(status: &Status) -> String {
    let gate = &status.gate;
    let mut out = format!(
        "gate {} ({})\npending facts: {} ({} held: in a plan, undone or rejected, edited in the archive, or in an entry memory.md cannot show)\nentries: {}",
        if gate.open { "open" } else { "shut" },
        gate.reason,
        status.pending_facts,
        status.held_facts,
        status.entries
    );
    if status.plans_waiting > 0 {
        let _ = write!(out, "\nreview: {} plans wait, {} ops proposed", status.plans_waiting, status.proposals_waiting);
    }
    match &status.last_run {
        Some(run) => {
            let _ = write!(out, "\nlast run: {} at {} ({} ops)", run.id, run.finished.to_rfc3339(), run.ops);
        }
        None => out.push_str("\nlast run: none"),
    }
    if status.problems > 0 {
        let _ = write!(out, "\nproblems: {} (a person can see them with `memfold verify`)", status.problems);
    }
    out
}

/// Stored plans with their ops and diffs.
pub fn plans(plans: &[PlanView]) -> String {
    if plans.is_empty() {
        return "no plans".to_string();
    }
    let mut out = String::new();
    for plan in plans {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&plan.headline());
        if plan.status == PlanStatus::Pending {
            for line in plan.ops.iter().map(op) {
                let _ = write!(out, "\n  {line}");
            }
            let _ = write!(out, "\n{}", plan.diff.trim_end());
        }
    }
    out
}

/// One stored plan, group by group.
pub fn plan_detail(detail: &PlanDetail) -> String {
    let texts: std::collections::HashMap<&str, &str> =
        detail.fact_texts.iter().map(|f| (f.id.as_str(), f.text.as_str())).collect();
    let mut out = detail.plan.headline();
    for group in &detail.groups {
        let _ = write!(out, "\ngroup {}:", group.group);
        for fact in &group.facts {
            let _ = write!(out, "\n  fact {fact}: {}", folded(texts.get(fact.as_str()).copied().unwrap_or("?")));
        }
        for detail in &group.ops {
            let _ = write!(out, "\n  {}", op(&detail.op));
            if let Some(why) = &detail.op.why {
                let _ = write!(out, " (why: {})", folded(why));
            }
            if let Some(c) = detail.op.confidence {
                let _ = write!(out, " (confidence {c:.2})");
            }
        }
        for e in &group.left_alone {
            let _ = write!(out, "\n  left alone {}: {}", e.id, folded(&e.content));
        }
    }
    out
}

pub fn applied(applied: &AppliedPlan) -> String {
    let rejected = if applied.rejected.is_empty() {
        String::new()
    } else {
        format!("; the other groups were rejected, their {} facts stay pending", applied.rejected.len())
    };
    format!(
        "applied plan {} as run {}{}: {} ops, {} facts{rejected} (memory_undo undoes it)",
        applied.plan,
        applied.run,
        if applied.rebased { ", rebased onto the changed memory.md" } else { "" },
        applied.ops,
        applied.facts.len()
    )
}

pub fn rejected(rejected: &RejectedPlan) -> String {
    format!(
        "rejected plan {}: nothing was written; {} facts stay pending, left out of automatic passes \
         (memory_consolidate with force = true decides them anew)",
        rejected.plan,
        rejected.facts.len()
    )
}

/// Applied runs, oldest first.
pub fn runs(runs: &[RunView]) -> String {
    if runs.is_empty() {
        return "no runs yet".to_string();
    }
    let lines: Vec<String> = runs
        .iter()
        .map(|run| {
            let ops: Vec<String> = run.ops.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
            let mut line = format!(
                "{} at {}: {}; {} facts",
                run.run,
                run.time.format("%Y-%m-%d %H:%M:%SZ"),
                ops.join(", "),
                run.facts
            );
            if let Some(plan) = &run.plan {
                let _ = write!(line, "; from plan {plan}");
            }
            if let Some(undone) = run.undone {
                let _ = write!(line, "; undone {}", undone.format("%Y-%m-%d %H:%M:%SZ"));
            }
            line
        })
        .collect();
    lines.join("\n")
}

pub fn undone(undone: &Undone) -> String {
    format!(
        "undid {}{}: {} entries restored ({}), {} removed ({}); {} facts pending again \
         (memory_consolidate with force = true decides them anew)",
        undone.run,
        if undone.exact { ", memory.md restored byte for byte" } else { "" },
        undone.restored.len(),
        ids(&undone.restored),
        undone.removed.len(),
        ids(&undone.removed),
        undone.facts.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_text_is_folded_onto_its_line() {
        assert_eq!(folded("Lives in Porto.\n\n  Since 2026-05."), "Lives in Porto. Since 2026-05.");
        assert_eq!(ids(&[]), "none");
        assert_eq!(ids(&["m-1".into(), "f-2".into()]), "m-1, f-2");
    }
}
