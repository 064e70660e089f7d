//! The gate: whether a consolidation pass may start now, and why not.
//!
//! A pass starts when the lock is free AND hours since the last pass ≥ `min_hours` AND
//! pending facts ≥ `min_facts`. `force` skips the two numbers, never the lock.

use chrono::{DateTime, Utc};
use serde::Serialize;

use memfold_store::config::ConsolidationConfig;

/// The gate's answer, as `status --json` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    pub open: bool,
    pub reason: String,
}

/// What the gate looks at.
#[derive(Debug, Clone)]
pub struct GateInput<'a> {
    /// Who holds the consolidation lock, if anyone.
    pub lock_holder: Option<&'a str>,
    pub last_run: Option<DateTime<Utc>>,
    pub now: DateTime<Utc>,
    pub pending: usize,
    pub force: bool,
}

pub fn evaluate(cfg: &ConsolidationConfig, input: &GateInput) -> Gate {
    let shut = |reason: String| Gate { open: false, reason };
    if !cfg.enabled {
        return shut("consolidation is off (consolidation.enabled = false); facts keep arriving".into());
    }
    if let Some(holder) = input.lock_holder {
        return shut(format!("consolidation already running (lock held by {holder})"));
    }
    if input.pending == 0 {
        return shut("no pending facts".into());
    }
    let hours = input.last_run.map(|t| (input.now - t).num_seconds() as f64 / 3600.0);
    if input.force {
        return Gate { open: true, reason: format!("forced: {} pending facts", input.pending) };
    }
    if let Some(hours) = hours.filter(|h| *h < cfg.min_hours) {
        return shut(format!("only {hours:.1} h since the last pass (min_hours = {})", cfg.min_hours));
    }
    if input.pending < cfg.min_facts {
        return shut(format!("only {} pending facts (min_facts = {})", input.pending, cfg.min_facts));
    }
    let since = hours.map_or("no pass yet".to_string(), |h| format!("{h:.1} h since the last pass"));
    Gate { open: true, reason: format!("{} pending facts, {since}", input.pending) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(pending: usize, hours_ago: Option<i64>, force: bool, holder: Option<&str>) -> Gate {
        let now = Utc::now();
        let cfg = ConsolidationConfig { min_facts: 20, min_hours: 24.0, ..Default::default() };
        evaluate(
            &cfg,
            &GateInput {
                lock_holder: holder,
                last_run: hours_ago.map(|h| now - chrono::Duration::hours(h)),
                now,
                pending,
                force,
            },
        )
    }

    #[test]
    fn the_master_switch_shuts_even_a_forced_pass() {
        let cfg = ConsolidationConfig { enabled: false, ..Default::default() };
        let input = GateInput { lock_holder: None, last_run: None, now: Utc::now(), pending: 50, force: true };
        let gate = evaluate(&cfg, &input);
        assert!(!gate.open && gate.reason.contains("consolidation.enabled = false"), "{gate:?}");
    }

    #[test]
    fn shut_below_min_facts_and_min_hours() {
        assert!(!input(5, None, false, None).open);
        assert!(input(5, None, false, None).reason.contains("min_facts = 20"));
        assert!(!input(50, Some(2), false, None).open);
        assert!(input(50, Some(2), false, None).reason.contains("min_hours = 24"));
        assert!(input(20, Some(25), false, None).open);
        assert!(input(20, None, false, None).open);
    }

    #[test]
    fn force_skips_the_numbers_not_the_lock() {
        assert!(input(1, Some(0), true, None).open);
        let held = input(100, None, true, Some("pid 7"));
        assert!(!held.open);
        assert!(held.reason.contains("pid 7"));
        assert!(!input(0, None, true, None).open, "nothing to do");
    }
}
