//! The daemon's scheduler on its own: its interval tick runs a pass when the gate is open,
//! with nobody asking for one.

use std::time::Duration;

use serde_json::Value;

use crate::common::daemon::{Fixture, eventually, metric, verify};

/// With `interval_seconds = 1` and a gate that opens at one fact, facts posted to a running
/// daemon are consolidated by the tick alone: no `POST /consolidate`, no `memory_consolidate`.
#[tokio::test]
async fn the_interval_tick_runs_a_pass_when_the_gate_opens() {
    let fixture = Fixture::new();
    let daemon = fixture
        .serve(&[
            ("MEMFOLD_CONSOLIDATION__INTERVAL_SECONDS", "1"),
            ("MEMFOLD_CONSOLIDATION__MIN_FACTS", "2"),
            ("MEMFOLD_CONSOLIDATION__MIN_HOURS", "0"),
        ])
        .await;
    // One fact keeps the gate shut: the ticks (two of them after the fact) run no pass.
    daemon.add(&["Keeps bees on the allotment."]).await;
    let before = metric(&daemon.metrics().await, "memfold_gate_checks_total");
    eventually(Duration::from_secs(30), "two ticks after the fact", async || {
        (metric(&daemon.metrics().await, "memfold_gate_checks_total") >= before + 2.0).then_some(())
    })
    .await;
    let (_, runs) = daemon.get("/runs").await;
    assert_eq!(runs["runs"], Value::Array(Vec::new()), "a pass ran with the gate shut: {runs}");

    daemon.add(&["Learned to make sourdough in March."]).await;
    let runs = eventually(Duration::from_secs(30), "a run made by the tick", async || {
        let (_, runs) = daemon.get("/runs").await;
        runs["runs"].as_array().filter(|r| !r.is_empty()).cloned()
    })
    .await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["facts"], 2, "{runs:?}");

    // The record of the pass is finished just after the run is written.
    let status = eventually(Duration::from_secs(10), "the tick's pass record", async || {
        let (_, status) = daemon.get("/status").await;
        let passes = status["daemon"]["passes"].as_array().cloned().unwrap_or_default();
        passes
            .iter()
            .any(|p| p["trigger"] == "schedule" && p["state"] == "done" && p["applied"] == true)
            .then_some(status)
    })
    .await;
    assert_eq!(status["pending_facts"], 0, "{status}");
    let text = daemon.metrics().await;
    assert_eq!(metric(&text, r#"memfold_passes_total{outcome="applied"}"#), 1.0);
    assert!(!text.contains("memfold_calls_total{verb=\"consolidate\""), "nobody asked for a pass:\n{text}");
    daemon.stop().await;
    assert_eq!(verify(&fixture.root())["ok"], true);
}
