//! kill -9 at every point of a commit, for every verb that changes memory: nothing is lost.
//!
//! Each scenario prepares a memory root once, then, for every place a commit can stop
//! (before its record is written, after it, after each file it writes, after it is removed),
//! copies the root, runs the verb in the real binary with `MEMFOLD_TEST_PAUSE_AT` naming that
//! place, kills the process with SIGKILL once it says it is there, and checks what a person
//! would: `verify` (which finishes the unfinished change first) is ok; the root is either as
//! it was before the verb or as a run of the verb to its end leaves it, never in between; and
//! a clean pass afterwards completes with `verify` still ok. The fake LLM is a real
//! OpenAI-compatible server whose scripted answers add, replace and merge entries.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use memfold::store::Root;
use memfold::store::entries::EntryFile;
use memfold::testkit::{FakeOpenAi, churn_reply};
use serde_json::Value;

/// What the files say, without run ids and times: `memory.md` byte for byte, and how many
/// history blocks, tombstones, journal lines, run records and pending plans there are.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    memory: String,
    history_blocks: usize,
    tombstones: usize,
    journal: usize,
    runs: usize,
    plans: usize,
}

fn lines(path: PathBuf) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().filter(|l| !l.trim().is_empty()).count())
}

fn files_in(dir: PathBuf) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.filter_map(Result::ok).count())
}

fn fingerprint(dir: &Path) -> Fingerprint {
    let root = Root::new(dir);
    let history = std::fs::read_to_string(root.history()).unwrap_or_default();
    let plans = std::fs::read_dir(root.plans_dir()).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"status\": \"pending\"")))
            .count()
    });
    Fingerprint {
        memory: std::fs::read_to_string(root.memory()).unwrap_or_default(),
        history_blocks: EntryFile::parse(&history, "history.md").entries().count(),
        tombstones: lines(root.tombstones()),
        journal: lines(root.journal()),
        runs: files_in(root.state_dir().join("runs")),
        plans,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    memfold::testkit::copy_dir(from, to).unwrap();
}

struct Lab {
    _dir: tempfile::TempDir,
    base: PathBuf,
    llm: FakeOpenAi,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        let llm = FakeOpenAi::start_in_thread();
        llm.set_chat_handler(churn_reply);
        Lab { _dir: dir, base, llm }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("MEMFOLD_LLM__BASE_URL", self.llm.base_url()),
            ("MEMFOLD_LLM__MODEL", memfold::testkit::FAKE_CHAT_MODEL.to_string()),
            ("MEMFOLD_LLM__API_KEY_ENV", String::new()),
            ("MEMFOLD_LLM__MAX_RETRIES", "0".to_string()),
        ]
    }

    fn run(&self, root: &Path, args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
        let env = self.env();
        let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        all.extend_from_slice(extra);
        crate::common::memfold(root, args, &all)
    }

    fn ok(&self, root: &Path, args: &[&str]) -> Value {
        let out = self.run(root, args, &[]);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// A root with 12 consolidated facts (one entry each), in `name`.
    fn consolidated(&self, name: &str) -> PathBuf {
        let root = self.base.join(name);
        self.ok(&root, &["init"]);
        let facts: Vec<String> =
            (0..12).map(|i| format!("The user's cousin number {i} lives in town {} and likes tea", i % 3)).collect();
        let mut args = vec!["add", "--date", "2026-05-01"];
        args.extend(facts.iter().map(String::as_str));
        self.ok(&root, &args);
        self.ok(&root, &["consolidate", "--force", "--json"]);
        root
    }

    /// `root` with 12 more facts that resemble the first ones, pending.
    fn with_news(&self, root: &Path) {
        let facts: Vec<String> =
            (0..12).map(|i| format!("The user's cousin number {i} moved to town {} and likes coffee", i % 4)).collect();
        let mut args = vec!["add", "--date", "2026-06-01"];
        args.extend(facts.iter().map(String::as_str));
        self.ok(root, &args);
    }

    fn verify_ok(&self, root: &Path, context: &str) {
        let out = self.run(root, &["verify", "--json"], &[]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert!(
            out.status.success() && report["ok"] == true,
            "{context}: verify failed: {report}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Run `args` on a copy of `template` and kill it at `kind:point`. Returns the copy and
    /// whether the process reached the point (else it ran to its end).
    fn kill_at(
        &self,
        template: &Path,
        args: &[&str],
        at: &str,
        extra: &[(&str, &str)],
        trial: &str,
    ) -> (PathBuf, bool) {
        let root = self.base.join(trial);
        copy_dir(template, &root);
        let paused = self.kill_in_place(&root, args, at, extra);
        (root, paused)
    }

    /// Run `args` on `root` and kill it with SIGKILL once it says it paused at `at`; returns
    /// whether it got there (else it ran to its end, successfully).
    fn kill_in_place(&self, root: &Path, args: &[&str], at: &str, extra: &[(&str, &str)]) -> bool {
        let mut cmd = crate::common::bin();
        cmd.arg("--root").arg(root).args(args);
        cmd.env_remove("MEMFOLD_ROOT").env("MEMFOLD_LOG", "warn").env("MEMFOLD_TEST_PAUSE_AT", at);
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut seen = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("memfold: paused at") {
                    let _ = tx.send(true);
                }
                seen.push_str(&line);
                seen.push('\n');
            }
            seen
        });
        let paused = rx.recv_timeout(Duration::from_secs(120)).unwrap_or(false);
        if paused {
            child.kill().unwrap(); // SIGKILL
        }
        let status = child.wait().unwrap();
        let stderr = reader.join().unwrap();
        if !paused {
            assert!(status.success(), "{args:?} without a pause at {at} failed: {stderr}");
        }
        paused
    }

    /// Kill `args` on copies of `template` at every point of its `kind` commit and check the
    /// invariants after each. `extra` is more environment for the verb.
    fn every_point(&self, name: &str, template: &Path, args: &[&str], kind: &str, extra: &[(&str, &str)]) -> usize {
        self.every_point_with(name, template, args, kind, extra, false)
    }

    /// [`Lab::every_point`]; with `verify_does_it`, the verb's change is one `verify` makes too
    /// (recording a hand deletion), so after a kill before the record it is done all the same.
    fn every_point_with(
        &self,
        name: &str,
        template: &Path,
        args: &[&str],
        kind: &str,
        extra: &[(&str, &str)],
        verify_does_it: bool,
    ) -> usize {
        let before = fingerprint(template);
        let clean = self.base.join(format!("{name}-clean"));
        copy_dir(template, &clean);
        let out = self.run(&clean, args, extra);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let after = fingerprint(&clean);
        assert_ne!(before, after, "{name}: the verb must change something");
        let mut points: Vec<String> = ["planned", "recorded"].iter().map(|p| p.to_string()).collect();
        points.extend((1..=12).map(|i| format!("step{i}")));
        points.push("done".into());
        let mut killed = 0;
        for point in points {
            let at = format!("{kind}:{point}");
            let (root, paused) = self.kill_at(template, args, &at, extra, &format!("{name}-{point}"));
            if !paused {
                assert!(point.starts_with("step"), "{name}: never reached {at}");
                // No such step: the verb ran to its end.
                assert_eq!(fingerprint(&root), after, "{name}: ran through {at}");
                continue;
            }
            killed += 1;
            self.verify_ok(&root, &format!("{name}, killed at {at}"));
            let now = fingerprint(&root);
            // Before its record is durable a change has not happened; from then on it has.
            let want = if point == "planned" && !verify_does_it { &before } else { &after };
            assert_eq!(&now, want, "{name}, killed at {at}");
            self.ok(&root, &["consolidate", "--force", "--json"]);
            self.verify_ok(&root, &format!("{name}, killed at {at}, then a clean pass"));
        }
        // planned, recorded, done and at least one file step.
        assert!(killed >= 4, "{name}: only {killed} points reached");
        killed
    }
}

#[test]
fn a_pass_killed_at_any_point_of_its_commit_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("pass");
    lab.with_news(&template);
    let killed = lab.every_point("pass", &template, &["consolidate", "--force"], "run", &[]);
    assert!(killed >= 8, "only {killed} points reached");
}

#[test]
fn a_recovery_killed_halfway_is_finished_by_the_next_one() {
    let lab = Lab::new();
    let template = lab.consolidated("recover");
    lab.with_news(&template);
    let after = {
        let clean = lab.base.join("recover-clean");
        copy_dir(&template, &clean);
        lab.ok(&clean, &["consolidate", "--force"]);
        fingerprint(&clean)
    };
    let (root, paused) = lab.kill_at(&template, &["consolidate", "--force"], "run:step1", &[], "recover-1");
    assert!(paused);
    for step in ["step2", "step4"] {
        assert!(lab.kill_in_place(&root, &["verify"], &format!("recover:{step}"), &[]), "recovery reached {step}");
    }
    lab.verify_ok(&root, "after two interrupted recoveries");
    assert_eq!(fingerprint(&root), after);
}

#[test]
fn forget_killed_at_any_point_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("forget");
    let id = crate::common::first_entry_id(&template).unwrap();
    lab.every_point("forget", &template, &["forget", &id], "forget", &[]);
}

#[test]
fn undo_killed_at_any_point_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("undo");
    lab.with_news(&template);
    lab.ok(&template, &["consolidate", "--force"]);
    let runs = lab.ok(&template, &["runs", "--json"]);
    let last = runs["runs"][0]["run"].as_str().unwrap().to_string();
    lab.every_point("undo", &template, &["undo", &last], "undo", &[]);
}

#[test]
fn apply_killed_at_any_point_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("apply");
    lab.with_news(&template);
    let review = [("MEMFOLD_CONSOLIDATION__MODE", "review")];
    let out = lab.run(&template, &["consolidate", "--force", "--json"], &review);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plan = report["plans"][0].as_str().expect("a plan was stored").to_string();
    lab.every_point("apply", &template, &["apply", &plan], "run", &review);
}

#[test]
fn rebuild_killed_at_any_point_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("rebuild");
    lab.with_news(&template);
    lab.ok(&template, &["consolidate", "--force"]);
    lab.every_point("rebuild", &template, &["rebuild"], "run", &[]);
}

#[test]
fn a_hand_deletion_recorded_by_a_pass_killed_at_any_point_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("hand");
    let root = Root::new(&template);
    let mut memory = EntryFile::read(&root.memory(), "memory.md").unwrap();
    let gone = memory.entries().nth(1).unwrap().id().to_string();
    memory.remove(&gone);
    std::fs::write(root.memory(), memory.render()).unwrap();
    // Nothing is pending, so the pass's only commit records the deletion.
    lab.every_point_with("hand", &template, &["consolidate", "--force"], "record", &[], true);
}

#[test]
fn merge_and_supersede_killed_at_any_point_lose_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("merge");
    let ids: Vec<String> = EntryFile::read(&Root::new(&template).memory(), "memory.md")
        .unwrap()
        .entries()
        .take(3)
        .map(|e| e.id().to_string())
        .collect();
    lab.every_point("merge", &template, &["merge", &ids[0], &ids[1]], "merge", &[]);
    let text = ["supersede", &ids[2], "--text", "The user's cousin number 2 moved away <!--m {\"id\":\"m-x\"}-->"];
    lab.every_point("supersede", &template, &text, "supersede", &[]);
}

#[test]
fn a_sweep_killed_at_any_point_loses_nothing() {
    let lab = Lab::new();
    let template = lab.consolidated("sweep");
    // A copy of an entry written by hand, for the sweep to propose folding.
    let memory = Root::new(&template).memory();
    let mut text = std::fs::read_to_string(&memory).unwrap();
    let first = EntryFile::parse(&text, "memory.md").entries().next().unwrap().content.clone();
    text.push_str(&format!("\n<!--m {{\"id\":\"m-byhand\"}}-->\n{}!\n", first.trim_end_matches('.')));
    std::fs::write(&memory, text).unwrap();
    lab.verify_ok(&template, "a hand-written copy");
    lab.every_point("sweep", &template, &["sweep"], "sweep", &[]);
}
