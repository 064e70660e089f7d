//! The daemon's counters, and their Prometheus text exposition for `GET /metrics`.
//!
//! Counters are atomics updated by the service and the workers that do the work; nothing here
//! takes a lock a handler could wait on for long. Calls are counted by verb and door
//! (`memfold_calls_total`), and what a verb did (facts ingested, LLM use) by verb only, so the
//! same call counts the same whichever door it came through. The exposition text (format 0.0.4) is
//! written by hand: one `# HELP` and `# TYPE` line per family, then its samples. Gauges that
//! describe the files (pending facts, entries) are read from the files when scraped and passed
//! to [`Metrics::render`].

use memfold_store::egress::Purpose;
use memfold_store::sys::guard;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Door, Verb};
use memfold_core::planning::consolidate::pass::PassReport;
use memfold_core::planning::run::ops::OpKind;
use memfold_models::llm::Usage;

/// What became of a pass the scheduler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassOutcome {
    /// The gate opened and ops were written.
    Applied,
    /// The gate opened; nothing to write (every decision failed or every op was dropped).
    Unchanged,
    /// A dry run.
    DryRun,
    /// The gate was shut (not counted as a pass; see `gate_checks`).
    GateShut,
    /// The consolidation lock was held by someone else.
    Busy,
    /// `memory.md` changed during the pass; nothing was written.
    Stale,
    /// Any other error.
    Failed,
    /// Shutdown came first; nothing was written by this pass.
    Abandoned,
}

impl PassOutcome {
    const ALL: [PassOutcome; 8] = [
        PassOutcome::Applied,
        PassOutcome::Unchanged,
        PassOutcome::DryRun,
        PassOutcome::GateShut,
        PassOutcome::Busy,
        PassOutcome::Stale,
        PassOutcome::Failed,
        PassOutcome::Abandoned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PassOutcome::Applied => "applied",
            PassOutcome::Unchanged => "unchanged",
            PassOutcome::DryRun => "dry_run",
            PassOutcome::GateShut => "gate_shut",
            PassOutcome::Busy => "busy",
            PassOutcome::Stale => "stale",
            PassOutcome::Failed => "failed",
            PassOutcome::Abandoned => "abandoned",
        }
    }
}

/// The op kinds, in the order `memfold_ops_total` lists them.
const OP_KINDS: [OpKind; 6] =
    [OpKind::Add, OpKind::Replace, OpKind::Remove, OpKind::Duplicate, OpKind::Retire, OpKind::Stale];

/// Upper bounds (seconds) of the pass duration histogram buckets.
const DURATION_BUCKETS: [f64; 11] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0];

/// Calls and tokens of one purpose.
#[derive(Debug, Default)]
struct LlmCounters {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl LlmCounters {
    fn add(&self, usage: Usage) {
        self.calls.fetch_add(usage.calls, Ordering::Relaxed);
        self.prompt_tokens.fetch_add(usage.prompt_tokens, Ordering::Relaxed);
        self.completion_tokens.fetch_add(usage.completion_tokens, Ordering::Relaxed);
    }
}

/// Every counter the daemon exposes.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Calls by (verb, door): a few dozen pairs at most.
    calls: Mutex<BTreeMap<(Verb, Door), u64>>,
    facts_added: AtomicU64,
    facts_from_turns: AtomicU64,
    gate_checks: AtomicU64,
    passes: [AtomicU64; PassOutcome::ALL.len()],
    ops: [AtomicU64; OP_KINDS.len()],
    llm_consolidate: LlmCounters,
    llm_extract: LlmCounters,
    llm_promote: LlmCounters,
    /// Non-cumulative bucket counts; the last slot is +Inf.
    pass_buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    pass_seconds_micros: AtomicU64,
    refreshes: AtomicU64,
    refresh_errors: AtomicU64,
    settles: AtomicU64,
    settle_errors: AtomicU64,
    /// Responses by status code (a handful of distinct codes; the lock is held for an insert).
    responses: Mutex<BTreeMap<u16, u64>>,
    connections_open: AtomicU64,
    connections_closed_silent: AtomicU64,
}

/// Values read from the files at scrape time.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    pub pending_facts: Option<usize>,
    pub entries: Option<usize>,
    pub uptime: Duration,
    /// Searches whose vector leg scanned the vectors the index holds (a count the index keeps).
    pub held_searches: Option<u64>,
    /// A home's spaces: how many, how many open, and the largest by entries, one by one.
    pub spaces: Option<SpaceGauges>,
    /// A root's `memory.md` in tokens, and what curation did over its life.
    pub memory_tokens: Option<usize>,
    pub curation: Option<memfold_core::memory::views::CurationStats>,
}

/// A home's spaces for `/metrics`: bounded labels, however many spaces there are.
#[derive(Debug, Clone, Default)]
pub struct SpaceGauges {
    pub all: usize,
    pub open: usize,
    /// (space, entries, pending facts) of the `spaces.metrics_top` largest.
    pub top: Vec<(String, usize, usize)>,
}

impl Metrics {
    /// Calls, gate checks, refreshes and settles so far, failed or not: a number that stands
    /// still while the daemon is idle.
    pub fn activity(&self) -> u64 {
        let calls: u64 = guard(&self.calls).values().sum();
        let counted = [&self.gate_checks, &self.refreshes, &self.refresh_errors, &self.settles, &self.settle_errors];
        calls + counted.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>()
    }

    pub fn call(&self, verb: Verb, door: Door) {
        *guard(&self.calls).entry((verb, door)).or_default() += 1;
    }

    /// Facts appended by `verb` ([`Verb::Add`] or [`Verb::AddTurn`]).
    pub fn facts_ingested(&self, verb: Verb, n: usize) {
        let counter = if verb == Verb::AddTurn { &self.facts_from_turns } else { &self.facts_added };
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn extract_llm(&self, usage: Usage) {
        self.llm_extract.add(usage);
    }

    /// Promotion calls made outside a pass (after an undo or an applied plan).
    pub fn promote_llm(&self, usage: Usage) {
        self.llm_promote.add(usage);
    }

    /// Count a pass: its outcome, and for a pass that ran (gate open) its duration, LLM use and applied ops.
    pub fn pass(&self, outcome: PassOutcome, report: Option<&PassReport>, elapsed: Duration) {
        self.gate_checks.fetch_add(1, Ordering::Relaxed);
        let index = PassOutcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        self.passes[index].fetch_add(1, Ordering::Relaxed);
        if let Some(report) = report {
            self.llm_consolidate.add(report.llm);
            if report.applied {
                for op in &report.ops {
                    if let Some(i) = OP_KINDS.iter().position(|&k| k == op.op) {
                        self.ops[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        if outcome != PassOutcome::GateShut && outcome != PassOutcome::Busy {
            let secs = elapsed.as_secs_f64();
            let bucket = DURATION_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(DURATION_BUCKETS.len());
            self.pass_buckets[bucket].fetch_add(1, Ordering::Relaxed);
            self.pass_seconds_micros.fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        }
    }

    /// A tick of the scheduler looked at a space's gate.
    pub fn gate_checked(&self) {
        self.gate_checks.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refreshed(&self, ok: bool) {
        let counter = if ok { &self.refreshes } else { &self.refresh_errors };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn settled(&self, ok: bool) {
        let counter = if ok { &self.settles } else { &self.settle_errors };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was accepted (`opened`) or ended.
    pub fn connection(&self, opened: bool) {
        match opened {
            true => self.connections_open.fetch_add(1, Ordering::Relaxed),
            false => self.connections_open.fetch_sub(1, Ordering::Relaxed),
        };
    }

    /// A connection that had sent no request head was closed to make room for a new one.
    pub fn silent_connection_closed(&self) {
        self.connections_closed_silent.fetch_add(1, Ordering::Relaxed);
    }

    pub fn response(&self, status: u16) {
        *guard(&self.responses).entry(status).or_default() += 1;
    }

    /// The Prometheus text exposition of every family.
    pub fn render(&self, gauges: Gauges) -> String {
        let mut out = Exposition::default();
        self.render_calls(&mut out);
        self.render_passes(&mut out);
        self.render_llm(&mut out);
        self.render_index(&mut out);
        render_gauges(&mut out, &gauges);
        out.0
    }

    /// Calls by verb and door, facts ingested, HTTP responses.
    fn render_calls(&self, out: &mut Exposition) {
        let calls: Vec<_> = self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|((verb, door), n)| {
                (format!(r#"{{verb="{}",door="{}"}}"#, verb.as_str(), door.as_str()), n.to_string())
            })
            .collect();
        out.family(
            "memfold_calls_total",
            "counter",
            "Calls of the service, by verb and by door (http, mcp, ui).",
            &calls,
        );
        out.family(
            "memfold_facts_ingested_total",
            "counter",
            "Facts appended to the archive by this daemon: given as facts (POST /facts, memory_add) or extracted \
             from a turn (POST /turns, memory_add_turn).",
            &[
                (r#"{via="facts"}"#.into(), get(&self.facts_added).to_string()),
                (r#"{via="turns"}"#.into(), get(&self.facts_from_turns).to_string()),
            ],
        );
        let responses: Vec<_> = self
            .responses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(code, n)| (format!(r#"{{code="{code}"}}"#), n.to_string()))
            .collect();
        out.family("memfold_http_responses_total", "counter", "HTTP responses by status code.", &responses);
        out.family(
            "memfold_http_connections_open",
            "gauge",
            "HTTP connections being served now (this scrape's own included).",
            &plain(get(&self.connections_open)),
        );
        out.family(
            "memfold_http_connections_closed_silent_total",
            "counter",
            "Connections closed, with every connection taken, because they had sent no request head while \
             another client waited (server.max_connections).",
            &plain(get(&self.connections_closed_silent)),
        );
    }

    /// Gate checks, passes by outcome, ops by kind, and the pass duration histogram.
    fn render_passes(&self, out: &mut Exposition) {
        out.family(
            "memfold_gate_checks_total",
            "counter",
            "Gates checked: each space's at every tick of the scheduler, and each pass's own.",
            &plain(get(&self.gate_checks)),
        );
        let passes: Vec<_> = PassOutcome::ALL
            .iter()
            .zip(&self.passes)
            .map(|(o, c)| (format!(r#"{{outcome="{}"}}"#, o.as_str()), get(c).to_string()))
            .collect();
        out.family("memfold_passes_total", "counter", "Consolidation attempts by outcome.", &passes);
        let ops: Vec<_> =
            OP_KINDS.iter().zip(&self.ops).map(|(k, c)| (format!(r#"{{op="{k}"}}"#), get(c).to_string())).collect();
        out.family("memfold_ops_total", "counter", "Operations written by applied passes, by kind.", &ops);
        let mut cumulative = 0;
        let mut buckets: Vec<_> = DURATION_BUCKETS
            .iter()
            .zip(&self.pass_buckets)
            .map(|(le, c)| {
                cumulative += get(c);
                (format!(r#"_bucket{{le="{le}"}}"#), cumulative.to_string())
            })
            .collect();
        cumulative += get(&self.pass_buckets[DURATION_BUCKETS.len()]);
        buckets.push((r#"_bucket{le="+Inf"}"#.into(), cumulative.to_string()));
        buckets.push(("_sum".into(), format!("{}", get(&self.pass_seconds_micros) as f64 / 1e6)));
        buckets.push(("_count".into(), cumulative.to_string()));
        out.family(
            "memfold_pass_duration_seconds",
            "histogram",
            "Duration of passes whose gate opened (including dry runs and failed ones).",
            &buckets,
        );
    }

    /// Chat completions and their tokens, by purpose.
    fn render_llm(&self, out: &mut Exposition) {
        let purposes = [
            (Purpose::Consolidate, &self.llm_consolidate),
            (Purpose::Extract, &self.llm_extract),
            (Purpose::Promote, &self.llm_promote),
        ];
        let by_purpose = |pick: fn(&LlmCounters) -> &AtomicU64| -> Vec<(String, String)> {
            purposes
                .iter()
                .map(|(purpose, c)| (format!(r#"{{purpose="{purpose}"}}"#), get(pick(c)).to_string()))
                .collect()
        };
        out.family(
            "memfold_llm_calls_total",
            "counter",
            "Chat completions, by purpose (a pass counts its promotion under consolidate).",
            &by_purpose(|c| &c.calls),
        );
        out.family(
            "memfold_llm_prompt_tokens_total",
            "counter",
            "Prompt tokens sent to the chat model, by purpose.",
            &by_purpose(|c| &c.prompt_tokens),
        );
        out.family(
            "memfold_llm_completion_tokens_total",
            "counter",
            "Completion tokens received from the chat model, by purpose.",
            &by_purpose(|c| &c.completion_tokens),
        );
    }

    /// Index refreshes and settles, by result.
    fn render_index(&self, out: &mut Exposition) {
        let results = |ok: &AtomicU64, error: &AtomicU64| {
            [
                (r#"{result="ok"}"#.to_string(), get(ok).to_string()),
                (r#"{result="error"}"#.to_string(), get(error).to_string()),
            ]
        };
        out.family(
            "memfold_index_refreshes_total",
            "counter",
            "Index refreshes after ingest, file changes and searches.",
            &results(&self.refreshes, &self.refresh_errors),
        );
        out.family(
            "memfold_index_settles_total",
            "counter",
            "Times the indexer folded small writes back into the indices (at start and when idle).",
            &results(&self.settles, &self.settle_errors),
        );
    }
}

/// The gauges read from the files (when they could be read) and the uptime.
fn render_gauges(out: &mut Exposition, gauges: &Gauges) {
    if let Some(pending) = gauges.pending_facts {
        out.family(
            "memfold_pending_facts",
            "gauge",
            "Archived facts not yet consolidated or tombstoned.",
            &plain(pending as u64),
        );
    }
    if let Some(held) = gauges.held_searches {
        out.family(
            "memfold_searches_held_vectors_total",
            "counter",
            "Searches whose vector leg scanned the vectors the daemon holds in memory (the others asked LanceDB).",
            &plain(held),
        );
    }
    let (sent, masked) = memfold_store::egress::counted();
    out.family(
        "memfold_egress_requests_total",
        "counter",
        "Requests sent to an LLM or embedding endpoint (each recorded in .memfold/egress.jsonl).",
        &plain(sent),
    );
    out.family(
        "memfold_egress_secrets_masked_total",
        "counter",
        "Secrets replaced by a marker in requests before they were sent.",
        &plain(masked),
    );
    if let Some(entries) = gauges.entries {
        out.family("memfold_entries", "gauge", "Current entries in consolidated/memory.md.", &plain(entries as u64));
    }
    if let Some(tokens) = gauges.memory_tokens {
        out.family(
            "memfold_memory_tokens",
            "gauge",
            "Estimated tokens of consolidated/memory.md (characters / 4).",
            &plain(tokens as u64),
        );
    }
    if let Some(c) = &gauges.curation {
        render_curation(out, c);
    }
    if let Some(spaces) = &gauges.spaces {
        render_spaces(out, spaces);
    }
    out.family(
        "memfold_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        &[(String::new(), format!("{:.3}", gauges.uptime.as_secs_f64()))],
    );
}

/// What curation did: tokens merges saved, ops undone, and how people decided proposals.
fn render_curation(out: &mut Exposition, c: &memfold_core::memory::views::CurationStats) {
    out.family(
        "memfold_tokens_saved_by_merges",
        "gauge",
        "Estimated tokens of the entries merges folded away, in runs not undone.",
        &plain(c.tokens_saved_by_merges as u64),
    );
    out.family(
        "memfold_ops_undone",
        "gauge",
        "Ops taken back by undos (whole runs and single ops).",
        &plain(c.ops_undone as u64),
    );
    let mut decided = Vec::new();
    let mut share = Vec::new();
    for d in &c.deciders {
        for (outcome, n) in
            [("applied", d.proposals_applied), ("rejected", d.proposals_rejected), ("expired", d.proposals_expired)]
        {
            decided.push((format!(r#"{{decider="{}",outcome="{outcome}"}}"#, d.decider), n.to_string()));
        }
        if let Some(r) = d.rejected_share {
            share.push((format!(r#"{{decider="{}"}}"#, d.decider), format!("{r:.4}")));
        }
    }
    if !decided.is_empty() {
        out.family("memfold_proposals", "gauge", "Proposals people decided, by decider and outcome.", &decided);
    }
    if !share.is_empty() {
        out.family(
            "memfold_proposals_rejected_share",
            "gauge",
            "Share of a decider's decided proposals that people rejected (its false-positive rate).",
            &share,
        );
    }
}

/// A home's spaces: how many, how many open, and the largest ones.
fn render_spaces(out: &mut Exposition, spaces: &SpaceGauges) {
    out.family(
        "memfold_spaces",
        "gauge",
        "Spaces of the home, and how many are open.",
        &[(r#"{state="all"}"#.into(), spaces.all.to_string()), (r#"{state="open"}"#.into(), spaces.open.to_string())],
    );
    let labelled = |pick: fn(&(String, usize, usize)) -> usize| -> Vec<(String, String)> {
        spaces.top.iter().map(|s| (format!(r#"{{space="{}"}}"#, s.0), pick(s).to_string())).collect()
    };
    out.family(
        "memfold_space_entries",
        "gauge",
        "Current entries of the largest spaces (spaces.metrics_top of them).",
        &labelled(|s| s.1),
    );
    out.family(
        "memfold_space_pending_facts",
        "gauge",
        "Pending facts of the largest spaces (spaces.metrics_top of them).",
        &labelled(|s| s.2),
    );
}

/// A Prometheus text exposition being written.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    /// One metric family: its help and type lines, then one line per (labels, value) sample.
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(self.0, "{name}{labels} {value}");
        }
    }
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// One sample without labels.
fn plain(v: u64) -> Vec<(String, String)> {
    vec![(String::new(), v.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_moves_with_every_call_pass_refresh_and_settle_and_nothing_else() {
        let m = Metrics::default();
        let mut last = m.activity();
        let mut moved = |m: &Metrics| std::mem::replace(&mut last, m.activity()) != m.activity();
        m.call(Verb::Search, Door::Http);
        assert!(moved(&m));
        m.pass(PassOutcome::GateShut, None, Duration::ZERO);
        assert!(moved(&m));
        m.refreshed(false);
        assert!(moved(&m));
        m.settled(true);
        assert!(moved(&m));
        m.response(200);
        m.facts_ingested(Verb::Add, 2);
        assert!(!moved(&m), "counted by the call that did them");
    }

    #[test]
    fn exposition_is_well_formed_and_histogram_is_cumulative() {
        let m = Metrics::default();
        m.facts_ingested(Verb::Add, 3);
        m.call(Verb::Add, Door::Mcp);
        m.pass(PassOutcome::Applied, None, Duration::from_millis(300));
        m.pass(PassOutcome::Failed, None, Duration::from_secs(2000));
        m.pass(PassOutcome::GateShut, None, Duration::ZERO);
        m.response(200);
        let text = m.render(Gauges {
            pending_facts: Some(7),
            entries: Some(2),
            uptime: Duration::from_secs(1),
            held_searches: Some(5),
            spaces: Some(SpaceGauges { all: 3, open: 2, top: vec![("work".into(), 40, 1), ("home".into(), 12, 0)] }),
            memory_tokens: Some(120),
            curation: Some(memfold_core::memory::views::CurationStats {
                runs: 2,
                tokens_saved_by_merges: 9,
                ops_undone: 1,
                deciders: vec![memfold_core::memory::views::DeciderStats {
                    decider: memfold_core::memory::views::DeciderKind::Offline,
                    proposals_applied: 3,
                    proposals_rejected: 1,
                    proposals_expired: 0,
                    rejected_share: Some(0.25),
                }],
            }),
        });
        assert!(text.contains("memfold_tokens_saved_by_merges 9\n"), "{text}");
        assert!(text.contains("memfold_proposals{decider=\"offline\",outcome=\"rejected\"} 1\n"), "{text}");
        assert!(text.contains("memfold_proposals_rejected_share{decider=\"offline\"} 0.2500\n"), "{text}");
        assert!(text.contains("memfold_facts_ingested_total{via=\"facts\"} 3\n"), "{text}");
        assert!(text.contains("memfold_calls_total{verb=\"add\",door=\"mcp\"} 1\n"), "{text}");
        assert!(text.contains("memfold_passes_total{outcome=\"applied\"} 1\n"));
        assert!(text.contains("memfold_gate_checks_total 3\n"));
        assert!(text.contains("memfold_pass_duration_seconds_bucket{le=\"0.1\"} 0\n"));
        assert!(text.contains("memfold_pass_duration_seconds_bucket{le=\"0.5\"} 1\n"));
        assert!(text.contains("memfold_pass_duration_seconds_bucket{le=\"900\"} 1\n"));
        assert!(text.contains("memfold_pass_duration_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("memfold_pass_duration_seconds_count 2\n"));
        assert!(text.contains("memfold_pending_facts 7\n"));
        assert!(text.contains("memfold_searches_held_vectors_total 5\n"), "{text}");
        assert!(text.contains("memfold_http_responses_total{code=\"200\"} 1\n"));
        assert!(text.contains("memfold_spaces{state=\"all\"} 3\n"), "{text}");
        assert!(text.contains("memfold_space_entries{space=\"work\"} 40\n"), "{text}");
        assert!(text.contains("memfold_space_pending_facts{space=\"home\"} 0\n"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(name.starts_with("memfold_"), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
