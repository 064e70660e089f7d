//! The text the command line prints and the MCP tools answer with, for the same views.
//!
//! One renderer for both doors, so they cannot drift: a line says the same thing to a person
//! at a shell and to an agent, one item per line with its id first so either can act on it.
//! Only the words for the next step differ ([`Reader`]): a person is told the command
//! (`memfold apply <plan>`), an agent the tool (`memory_apply_plan`). Multi-line entry text
//! is folded onto its line. The `--json` documents and MCP's structured content carry the
//! views themselves; this text says the same in fewer words.

use std::fmt::Write;

use chrono::NaiveDate;

use memfold_core::memory::views::{
    Added, AppliedPlan, Chain, Curated, Forgotten, Hit, OpReport, PassReport, PlanDetail, PlanStatus, PlanView,
    Reindexed, RejectedPlan, Report, RunDetail, RunView, Status, TextFrom, Undone,
};

/// Who reads the text, and so how a next step is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A person at a shell: commands.
    Person,
    /// An agent through MCP: tool names.
    Agent,
}

/// A next step a text may point to.
enum Step<'a> {
    Plans,
    Decide(&'a str),
    Force,
    Undo(&'a str),
    Verify,
}

impl Reader {
    fn step(self, step: Step) -> String {
        match (self, step) {
            (Reader::Person, Step::Plans) => "`memfold plans`".into(),
            (Reader::Person, Step::Decide(plan)) => format!("`memfold apply {plan}` or `memfold reject {plan}`"),
            (Reader::Person, Step::Force) => "`memfold consolidate --force`".into(),
            (Reader::Person, Step::Undo(run)) => format!("`memfold undo {run}`"),
            (Reader::Person, Step::Verify) => "`memfold verify`".into(),
            (Reader::Agent, Step::Plans) => "memory_plans".into(),
            (Reader::Agent, Step::Decide(_)) => "memory_apply_plan or memory_reject_plan".into(),
            (Reader::Agent, Step::Force) => "memory_consolidate with force = true".into(),
            (Reader::Agent, Step::Undo(_)) => "memory_undo".into(),
            (Reader::Agent, Step::Verify) => "`memfold verify` (a person runs it)".into(),
        }
    }
}

/// Text on one line.
fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A list of ids, or `none`.
fn ids(ids: &[String]) -> String {
    if ids.is_empty() { "none".to_string() } else { ids.join(", ") }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn day(d: Option<NaiveDate>) -> String {
    d.map_or("?".to_string(), |d| d.to_string())
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
            format!("{} [{}{when}] {:.3} {}", h.id, h.kind.as_str(), h.score, folded(&h.text))
        })
        .collect();
    lines.join("\n")
}

/// An entry's versions: the current one first, then the older ones and those merged into it.
/// `about NAME`: the entries about it, then what was true before; or, asked for no name, the
/// names memory speaks of.
pub fn about(answer: &memfold_core::memory::views::AboutAnswer) -> String {
    use memfold_core::memory::views::AboutAnswer;
    let line = |e: &memfold_core::memory::views::AboutEntry| {
        let mut notes = vec![e.id.clone()];
        if let Some(updated) = e.updated {
            notes.push(updated.to_string());
        }
        if e.how == "linked" {
            notes.push("linked".into());
        }
        if let Some(status) = &e.status {
            notes.push(status.clone());
        }
        if !e.related.is_empty() {
            notes.push(format!("related {}", e.related.join(", ")));
        }
        format!("- {} [{}]", e.text.split_whitespace().collect::<Vec<_>>().join(" "), notes.join(" · "))
    };
    match answer {
        AboutAnswer::Names { names } if names.is_empty() => "no names yet".into(),
        AboutAnswer::Names { names } => {
            names.iter().map(|n| format!("{} ({})", n.name, n.entries)).collect::<Vec<_>>().join("\n")
        }
        AboutAnswer::About(about) => {
            let mut out = match about.entries.len() {
                0 => format!("nothing about {}", about.name),
                n => format!("{n} entr{} about {}:", if n == 1 { "y" } else { "ies" }, about.name),
            };
            for e in &about.entries {
                out.push('\n');
                out.push_str(&line(e));
            }
            if !about.history.is_empty() {
                out.push_str("\nbefore:");
                for e in &about.history {
                    out.push('\n');
                    out.push_str(&line(e));
                }
            }
            out
        }
    }
}

pub fn chain(chain: &Chain) -> String {
    let current = chain.versions.iter().filter(|v| v.status.is_current());
    let older = chain.versions.iter().filter(|v| !v.status.is_current());
    let lines: Vec<String> = current
        .chain(older)
        .map(|v| {
            let mut notes = vec![v.status.to_string()];
            if v.pinned {
                notes.push("pinned".into());
            }
            notes.push(format!("first seen {}", day(v.first_seen)));
            notes.push(format!("updated {}", day(v.updated)));
            if let Some(until) = v.valid_until {
                notes.push(format!("until {until}"));
            }
            if let Some(next) = &v.superseded_by {
                notes.push(format!("superseded by {next}"));
            }
            if !v.supersedes.is_empty() {
                notes.push(format!("supersedes {}", v.supersedes.join(", ")));
            }
            if let Some(run) = &v.run {
                notes.push(format!("run {run}"));
            }
            format!("{} ({}): {}", v.id, notes.join(", "), folded(&v.content))
        })
        .collect();
    lines.join("\n")
}

pub fn forgotten(done: &Forgotten) -> String {
    format!("forgot {} {}; it will not come back (tombstoned: {})", done.kind, done.id, ids(&done.tombstoned))
}

/// What `memfold sync` did.
pub fn synced(report: &memfold_core::memory::SyncReport) -> String {
    let m = &report.merged;
    let mut out = format!("synced with {}", report.remote);
    if report.merges == 0 {
        out.push_str(if report.committed {
            ": sent what changed here; nothing new there"
        } else {
            ": nothing new on either side"
        });
    } else {
        out.push_str(&format!(
            ": {} fact{} and {} entr{} came in, {} tombstone{}",
            m.facts,
            plural(m.facts),
            m.entries,
            if m.entries == 1 { "y" } else { "ies" },
            m.tombstones,
            plural(m.tombstones)
        ));
    }
    for c in &m.conflicts {
        let kept = if c.theirs_kept { "the other machine's version" } else { "this machine's version" };
        let what = match c.kind {
            memfold_core::memory::views::ConflictKind::ChangedOnBoth => "changed on two machines",
            memfold_core::memory::views::ConflictKind::RemovedHere => "removed here, changed on the other machine",
            memfold_core::memory::views::ConflictKind::RemovedThere => "removed on the other machine, changed here",
        };
        out.push_str(&format!("\n  {}: {what}; {kept} is current", c.entry));
    }
    if let Some(plan) = &m.plan {
        out.push_str(&format!(
            "\n  plan {plan} offers the other choice of each (the other version back, or the removal): \
             `memfold plan {plan}`, then `apply` or `reject` it"
        ));
    }
    for id in &m.buried {
        out.push_str(&format!("\n  {id}: left memory.md, a fact of it was forgotten on a machine"));
    }
    for path in &m.refused {
        out.push_str(&format!("\n  {path}: not memfold's to merge; left as it is here, never written"));
    }
    for path in &m.fewer {
        out.push_str(&format!(
            "\n  {path}: the other machine's copy lacks some of what this one holds; nothing was taken away here"
        ));
    }
    if m.redacted > 0 {
        out.push_str(&format!(
            "\n  {} credential{} in facts from the other machine redacted here (ingest.secrets)",
            m.redacted,
            plural(m.redacted)
        ));
    }
    out.push_str(&format!("\n  {} ms merging, {} ms in git", report.ms, report.git_ms));
    out
}

/// `memfold spaces --merge INTO FROM`.
pub fn joined(into: &str, joined: &memfold_core::memory::JoinedSpace) -> String {
    let m = &joined.merged;
    let mut out = format!(
        "space {} joined into {into}: {} fact{} and {} entr{} came in, {} tombstone{}; its folder is kept at {}",
        joined.from,
        m.facts,
        plural(m.facts),
        m.entries,
        if m.entries == 1 { "y" } else { "ies" },
        m.tombstones,
        plural(m.tombstones),
        joined.kept_at.display()
    );
    if let Some(plan) = &m.plan {
        out.push_str(&format!(
            "\n  entries both spaces held with different texts: plan {plan} offers the other version of each \
             (`memfold --space {into} plan {plan}`)"
        ));
    }
    out
}

/// `memfold sync --status`.
pub fn sync_status(status: &memfold_core::memory::SyncStatus) -> String {
    if !status.enabled {
        return "sync is not set up: `memfold sync --init REMOTE`".to_string();
    }
    let s = &status.state;
    let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or("never".to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
    };
    let mut out = format!(
        "remote: {}\nlast sync: {}\nahead {}, behind {} (as of the last fetch){}",
        s.remote.as_deref().unwrap_or("?"),
        when(s.last_sync),
        status.ahead,
        status.behind,
        if status.changed { "; files changed here since" } else { "" }
    );
    if let Some(error) = &s.last_error {
        out.push_str(&format!("\nlast attempt {} failed: {error}", when(s.last_attempt)));
    }
    out
}

pub fn pinned(id: &str, pinned: bool) -> String {
    if pinned {
        format!("pinned {id}: consolidation will never replace or remove it")
    } else {
        format!("unpinned {id}")
    }
}

/// An op in a few words: its kind and the entries it names (`REMOVE m-1 into m-2`).
pub fn op_label(op: &OpReport) -> String {
    match (&op.target, &op.into) {
        (Some(t), Some(i)) => format!("{} {t} into {i}", op.op),
        (Some(t), None) => format!("{} {t}", op.op),
        _ => op.op.to_string(),
    }
}

/// One op on one line: kind, target, and what it writes.
pub fn op(op: &OpReport) -> String {
    let target = op.target.as_deref().unwrap_or("(new)");
    let what = match (&op.content, &op.into) {
        (Some(content), _) => folded(content),
        (None, Some(into)) => format!("into {into}"),
        (None, None) if op.facts.is_empty() => "leaves memory; its facts are pending again".to_string(),
        (None, None) => format!("facts {}", op.facts.join(", ")),
    };
    format!("{} {target} {what}", op.op)
}

/// An op with why it was proposed: the decider's reason, the signals that fired, its confidence.
fn op_with_reasons(op: &OpReport) -> String {
    let mut notes: Vec<String> = op.why.iter().map(|w| folded(w)).collect();
    notes.extend(op.signals.iter().cloned());
    notes.extend(op.confidence.map(|c| format!("confidence {c:.2}")));
    match notes.is_empty() {
        true => self::op(op),
        false => format!("{} [{}]", self::op(op), notes.join("; ")),
    }
}

/// What a pass did, would do (dry run), or why it did not start.
pub fn pass(report: &PassReport, reader: Reader) -> String {
    if !report.gate.open {
        return format!(
            "not consolidating: {} ({} skips min_hours and min_facts)",
            report.gate.reason,
            reader.step(Step::Force)
        );
    }
    let mut lines: Vec<String> = report.ops.iter().map(op).collect();
    lines.push(format!("run {}", report.summary()));
    for plan in &report.plans {
        lines.push(format!(
            "plan {plan} stored for review: {} shows it, {} decides it",
            reader.step(Step::Plans),
            reader.step(Step::Decide(plan))
        ));
    }
    lines.join("\n")
}

/// The state of memory at a glance.
pub fn status(status: &Status, reader: Reader) -> String {
    let gate = &status.gate;
    let mut out = format!(
        "gate: {} ({})\npending facts: {}",
        if gate.open { "open" } else { "shut" },
        gate.reason,
        status.pending_facts
    );
    if status.held_facts > 0 {
        let _ = write!(
            out,
            " ({} held: in a plan, undone or rejected, which {} takes up; or edited in the archive or in an \
             entry memory.md cannot show, which {} names)",
            status.held_facts,
            reader.step(Step::Force),
            reader.step(Step::Verify)
        );
    }
    let _ = write!(out, "\nentries: {}", status.entries);
    let mut about = Vec::new();
    if status.related_entries > 0 {
        about.push(format!("{} related", status.related_entries));
    }
    if status.named_entries > 0 {
        about.push(format!("{} naming someone or something (`memfold about`)", status.named_entries));
    }
    if status.stale_entries > 0 {
        about.push(format!("{} unused for long (`memfold sweep --stale`)", status.stale_entries));
    }
    if !about.is_empty() {
        let _ = write!(out, " ({})", about.join(", "));
    }
    if status.plans_waiting > 0 {
        let _ = write!(
            out,
            "\nreview: {} plans wait, {} ops proposed ({})",
            status.plans_waiting,
            status.proposals_waiting,
            reader.step(Step::Plans)
        );
    }
    let _ = write!(out, "\nembedder: {} ({})", status.embedder.name, status.embedder.why);
    match &status.last_run {
        Some(run) => {
            let _ = write!(out, "\nlast run: {} at {} ({} ops)", run.id, run.finished.to_rfc3339(), run.ops);
        }
        None => out.push_str("\nlast run: none"),
    }
    if let Some(sync) = &status.sync {
        let when = sync.last_sync.map_or("never".to_string(), |t| t.to_rfc3339());
        let _ = write!(out, "\nsync: last at {when}");
        if let Some(error) = &sync.last_error {
            let _ = write!(out, "; the last attempt failed: {error}");
        }
    }
    if status.problems > 0 {
        let _ = write!(out, "\nproblems: {} (see {})", status.problems, reader.step(Step::Verify));
    }
    out
}

/// What `verify` found: each problem and warning, then the tally.
pub fn verified(report: &Report) -> String {
    let mut lines: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    lines.extend(report.warnings.iter().map(|w| format!("warning: {w}")));
    let retired = match report.retired {
        0 => String::new(),
        n => format!(", {n} retired"),
    };
    lines.push(format!(
        "{}: {} facts ({} pending, {} consolidated, {} tombstoned{retired}), {} problems",
        if report.ok { "ok" } else { "NOT OK" },
        report.facts,
        report.pending,
        report.consolidated,
        report.tombstoned,
        report.problems.len()
    ));
    lines.join("\n")
}

pub fn reindexed(done: &Reindexed) -> String {
    let stats = &done.stats;
    format!(
        "{} docs: {} embedded, {} written, {} deleted, {} unchanged in {:.2}s",
        done.docs, stats.embedded, stats.upserted, stats.deleted, stats.unchanged, done.seconds
    )
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
            for line in plan.ops.iter().map(op_with_reasons) {
                let _ = write!(out, "\n  {line}");
            }
            let _ = write!(out, "\n{}", plan.diff.trim_end());
        }
    }
    out
}

/// One stored plan, group by group: its facts as archived, its ops, and the entries shown to
/// the decider that it leaves alone.
pub fn plan_detail(detail: &PlanDetail) -> String {
    let texts: std::collections::HashMap<&str, &str> =
        detail.fact_texts.iter().map(|f| (f.id.as_str(), f.text.as_str())).collect();
    let mut out = detail.plan.headline();
    for group in &detail.groups {
        let _ = write!(out, "\ngroup {}: {} op{}", group.group, group.ops.len(), plural(group.ops.len()));
        for fact in &group.facts {
            let _ = write!(out, "\n  fact {fact}: {}", folded(texts.get(fact.as_str()).copied().unwrap_or("?")));
        }
        for detail in &group.ops {
            let _ = write!(out, "\n  {}", op_with_reasons(&detail.op));
            for change in &detail.changes {
                let before = change.before.as_deref().unwrap_or("");
                let after = change.after.as_deref().unwrap_or("");
                for line in memfold_core::memory::text::unified(before, after, &change.entry, 1).lines() {
                    let _ = write!(out, "\n    {line}");
                }
            }
        }
        for e in &group.left_alone {
            let _ = write!(out, "\n  left alone {}: {}", e.id, folded(&e.content));
        }
    }
    out
}

/// One applied run, op by op and group by group, numbered as `undo --op` and `--group` take them.
pub fn run_detail(detail: &RunDetail) -> String {
    let mut out = runs(std::slice::from_ref(&detail.run));
    for group in &detail.groups {
        let _ = write!(out, "\ngroup {}: {} op{}", group.group, group.ops.len(), plural(group.ops.len()));
        for op in &group.ops {
            let n = op.seq + 1;
            let undone = if detail.run.undone_ops.contains(&n) { " (undone)" } else { "" };
            let _ = write!(out, "\n  op {n}{undone}: {}", op_with_reasons(&op.op));
            for change in &op.changes {
                let before = change.before.as_deref().unwrap_or("");
                let after = change.after.as_deref().unwrap_or("");
                for line in memfold_core::memory::text::unified(before, after, &change.entry, 1).lines() {
                    let _ = write!(out, "\n    {line}");
                }
            }
        }
    }
    out
}

/// What a sweep found.
pub fn sweep(report: &memfold_core::memory::SweepReport) -> String {
    let mut out = String::new();
    if !report.stale_only {
        let _ = write!(
            out,
            "swept {} of {} entries{} ({} decider): {} with neighbours, {} decided{}; {} proposals{}",
            report.swept,
            report.entries,
            if report.full { " (full)" } else { "" },
            report.decider,
            report.compared,
            report.decided,
            if report.left > 0 { format!(", {} left for the next sweep", report.left) } else { String::new() },
            report.ops.len(),
            match (&report.plan, report.dry_run) {
                (Some(plan), _) => format!(" stored as plan {plan} (`memfold plan {plan}`)"),
                (None, true) => " (dry run: nothing stored)".to_string(),
                (None, false) => String::new(),
            }
        );
        if report.llm.calls > 0 {
            let _ = write!(
                out,
                "; {} LLM calls ({} + {} tokens)",
                report.llm.calls, report.llm.prompt_tokens, report.llm.completion_tokens
            );
        }
        for op in &report.ops {
            let _ = write!(out, "\n  {}", op_with_reasons(op));
        }
        out.push('\n');
    }
    if report.retire_after_days == 0 {
        out.push_str("stale: none looked for (decay.retire_after_days = 0)");
        return out;
    }
    let _ = write!(
        out,
        "stale: {} of {} entries unused for more than {} days{}",
        report.stale.len(),
        report.entries,
        report.retire_after_days,
        match (&report.stale_plan, &report.stale_run, report.dry_run) {
            (Some(_), Some(run), _) =>
                format!(", retired by run {run} (consolidation.auto_apply names STALE; `memfold undo {run}`)"),
            (Some(plan), None, _) => format!(", proposed for retirement as plan {plan} (`memfold plan {plan}`)"),
            (None, _, true) if !report.stale.is_empty() => " (dry run: nothing stored)".to_string(),
            _ => String::new(),
        }
    );
    for op in &report.stale {
        let _ = write!(out, "\n  {}", op_with_reasons(op));
    }
    out
}

/// What a merge or a supersession did.
pub fn curated(done: &Curated, reader: Reader) -> String {
    let from = match done.text_from {
        Some(TextFrom::Given) => " with the text given",
        Some(TextFrom::Llm) => " with the LLM's text",
        Some(TextFrom::Joined) => " with the texts joined",
        None => "",
    };
    let drops = if done.drops.is_empty() {
        String::new()
    } else {
        format!("; the text does not say {}", done.drops.join(", "))
    };
    let what = match done.verb {
        "merge" => format!("merged {} into {}{from}", ids(&done.retired), done.entry),
        _ if done.retired.is_empty() => format!("superseded {} by a new text", done.entry),
        _ => format!("superseded {} by {}", ids(&done.retired), done.entry),
    };
    format!(
        "{what} as run {}{drops}: {} ({} undoes it)",
        done.run,
        folded(&done.content),
        reader.step(Step::Undo(&done.run))
    )
}

pub fn applied(applied: &AppliedPlan, reader: Reader) -> String {
    let rejected = if applied.rejected.is_empty() {
        String::new()
    } else {
        format!(
            "; the other groups were rejected, their {} facts stay pending ({} decides them anew)",
            applied.rejected.len(),
            reader.step(Step::Force)
        )
    };
    format!(
        "applied plan {} as run {}{}: {} ops, {} facts{rejected} ({} undoes it)",
        applied.plan,
        applied.run,
        if applied.rebased { ", rebased onto the changed memory.md" } else { "" },
        applied.ops,
        applied.facts.len(),
        reader.step(Step::Undo(&applied.run))
    )
}

pub fn rejected(rejected: &RejectedPlan, reader: Reader) -> String {
    format!(
        "rejected plan {}: nothing was written; {} facts stay pending, left out of automatic passes \
         ({} decides them anew)",
        rejected.plan,
        rejected.facts.len(),
        reader.step(Step::Force)
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
            if let Some(u) = run.llm {
                let _ = write!(line, "; {} LLM calls ({} + {} tokens)", u.calls, u.prompt_tokens, u.completion_tokens);
            }
            if let Some(plan) = &run.plan {
                let _ = write!(line, "; from plan {plan}");
            }
            if let Some(verb) = &run.verb {
                let _ = write!(line, "; {verb} by hand");
            }
            if !run.undone_ops.is_empty() {
                let ops: Vec<String> = run.undone_ops.iter().map(usize::to_string).collect();
                let _ = write!(line, "; ops undone: {}", ops.join(","));
            }
            if let Some(undone) = run.undone {
                let _ = write!(line, "; undone {}", undone.format("%Y-%m-%d %H:%M:%SZ"));
            }
            for note in &run.notes {
                let _ = write!(line, "\n  note ({note})");
            }
            line
        })
        .collect();
    lines.join("\n")
}

pub fn undone(undone: &Undone, reader: Reader) -> String {
    let part = if undone.ops.is_empty() {
        String::new()
    } else {
        format!(" op {}", undone.ops.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
    };
    format!(
        "undid {}{part}{}: {} entries restored ({}), {} removed ({}); {} facts pending again \
         ({} decides them anew)",
        undone.run,
        if undone.exact { ", memory.md restored byte for byte" } else { "" },
        undone.restored.len(),
        ids(&undone.restored),
        undone.removed.len(),
        ids(&undone.removed),
        undone.facts.len(),
        reader.step(Step::Force)
    )
}

/// A home's spaces, one line each.
pub fn spaces(spaces: &[crate::service::SpaceSummary]) -> String {
    if spaces.is_empty() {
        return "no spaces yet (`memfold --home … --space NAME init` makes one)".to_string();
    }
    let lines: Vec<String> = spaces
        .iter()
        .map(|s| {
            let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
                t.map_or("never".to_string(), |t| t.format("%Y-%m-%d %H:%M").to_string())
            };
            format!(
                "{}{}: {} entries, {} pending; last pass {}, last use {}; {} KiB",
                s.name,
                if s.shared { " (shared)" } else { "" },
                s.entries,
                s.pending_facts,
                when(s.last_pass),
                when(s.last_use),
                s.disk_bytes / 1024
            )
        })
        .collect();
    lines.join("\n")
}

/// The requests that left the machine, one line each.
pub fn egress(sent: &[memfold_core::memory::views::Sent]) -> String {
    if sent.is_empty() {
        return "no request has left this machine (no LLM or embedding endpoint was asked)".into();
    }
    let mut lines: Vec<String> = sent
        .iter()
        .map(|s| {
            let masked = if s.masked > 0 { format!(", {} secrets masked", s.masked) } else { String::new() };
            format!(
                "{}  {:<11} {}  {} bytes  body {}{masked}",
                s.time.format("%Y-%m-%d %H:%M:%S"),
                s.purpose,
                s.host,
                s.bytes,
                s.body_hash
            )
        })
        .collect();
    let bytes: usize = sent.iter().map(|s| s.bytes).sum();
    lines.push(format!("{} requests, {bytes} bytes", sent.len()));
    lines.join("\n")
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

    #[test]
    fn a_person_is_told_the_command_and_an_agent_the_tool() {
        assert_eq!(Reader::Person.step(Step::Decide("r-1")), "`memfold apply r-1` or `memfold reject r-1`");
        assert_eq!(Reader::Agent.step(Step::Decide("r-1")), "memory_apply_plan or memory_reject_plan");
        assert!(Reader::Agent.step(Step::Force).starts_with("memory_consolidate"));
    }
}
