//! The `memfold` binary driven as a user would: init, add, status, verify.

use std::collections::HashSet;
use std::io::Write;
use std::process::Stdio;

use crate::common::{bin, json, memfold};

fn init() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    assert!(memfold(dir.path(), &["init"], &[]).status.success());
    dir
}

#[test]
fn init_add_verify_as_the_readme_shows() {
    let dir = init();
    let root = dir.path();
    for path in ["archive", "consolidated/memory.md", "consolidated/history.md", "MEMORY.md", ".memfold"] {
        assert!(root.join(path).exists(), "{path} missing after init");
    }
    let added = json(&memfold(
        root,
        &["add", "--json", "--source", "chat", "Moved to Lisbon in October.", "Has a dog named Rex."],
        &[],
    ));
    let facts = added["facts"].as_array().unwrap();
    assert_eq!(facts.len(), 2);
    assert!(facts[0]["id"].as_str().unwrap().starts_with("f-"));
    assert_eq!(facts[0]["text"], "Moved to Lisbon in October.");
    let verify = json(&memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["ok"], true, "{verify}");
    assert_eq!(verify["facts"], 2);
    assert_eq!(verify["pending"], 2);
    assert_eq!(verify["consolidated"], 0);
    assert_eq!(verify["tombstoned"], 0);
    let status = json(&memfold(root, &["status", "--json"], &[]));
    assert_eq!(status["pending_facts"], 2);
    assert_eq!(status["gate"]["open"], false);
    assert!(status["gate"]["reason"].as_str().unwrap().contains("min_facts"), "{status}");
}

#[test]
fn add_with_date_and_stdin() {
    let dir = init();
    let mut child = crate::common::bin()
        .args(["add", "--stdin", "--json", "--date", "2026-05-27", "--root"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Works at Google\n\nLikes green tea\n").unwrap();
    let out = json(&child.wait_with_output().unwrap());
    assert_eq!(out["facts"].as_array().unwrap().len(), 2);
    assert_eq!(out["facts"][1]["date"], "2026-05-27");
    assert!(dir.path().join("archive/2026-05-27.md").exists());
}

#[test]
fn concurrent_add_from_four_processes_loses_nothing() {
    let dir = init();
    let root = dir.path();
    // 4 concurrent writers, each running 50 `memfold add` processes of 10 facts: 2000 facts.
    std::thread::scope(|s| {
        for w in 0..4 {
            s.spawn(move || {
                for batch in 0..50 {
                    let texts: Vec<String> = (0..10).map(|i| format!("writer {w} batch {batch} fact {i}")).collect();
                    let mut args = vec!["add"];
                    args.extend(texts.iter().map(String::as_str));
                    let out = memfold(root, &args, &[]);
                    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                }
            });
        }
    });
    let verify = json(&memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["ok"], true, "{verify}");
    assert_eq!(verify["facts"], 2000);
    let text: String = std::fs::read_dir(root.join("archive"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let lines: Vec<_> = text.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(lines.len(), 2000);
    assert!(lines.iter().all(|l| l.ends_with("\"}-->")), "every line whole");
    let distinct: HashSet<_> = lines.iter().map(|l| l.split(" <!--f ").next().unwrap()[8..].to_string()).collect();
    assert_eq!(distinct.len(), 2000);
}

#[test]
fn malformed_archive_line_is_reported_and_the_rest_loads() {
    let dir = init();
    let root = dir.path();
    std::fs::write(
        root.join("archive/2026-11-20.md"),
        "# 2026-11-20\n\n- Likes tea\nthis is not a fact line\n- Likes coffee\n",
    )
    .unwrap();
    let out = memfold(root, &["verify", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1), "verify fails while a line is malformed");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["facts"], 2, "the good lines still load");
    assert_eq!(report["problems"][0]["file"], "archive/2026-11-20.md");
    assert_eq!(report["problems"][0]["line"], 4);
}

#[test]
fn hand_appended_lines_get_ids_and_are_pending() {
    let dir = init();
    let root = dir.path();
    std::fs::write(root.join("archive/2026-11-21.md"), "- Written by hand\n- 08:30 Also by hand\n").unwrap();
    let verify = json(&memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["ok"], true, "{verify}");
    assert_eq!(verify["pending"], 2);
}

#[test]
fn uninitialised_root_and_unknown_config_key_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = memfold(dir.path(), &["status"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("memfold init"));
    let dir = init();
    std::fs::write(dir.path().join("memfold.toml"), "[consolidation]\nmin_fact = 3\n").unwrap();
    let out = memfold(dir.path(), &["status"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("min_fact"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Ingest, planning and forgetting ask one clock what today is: the archive file a fact goes
/// to, the dates of the entry made from it and of its deleted version are the same day, in
/// whatever zone `time.zone` names (here two zones 26 hours apart, so their days differ).
#[test]
fn one_clock_dates_archive_files_entries_and_history_alike() {
    for (zone, hours) in [("+14:00", 14), ("-12:00", -12)] {
        let dir = init();
        let root = dir.path();
        let env = [("MEMFOLD_TIME__ZONE", zone)];
        let day = || (chrono::Utc::now() + chrono::Duration::hours(hours)).date_naive().to_string();
        let before = day();
        let added = json(&memfold(root, &["add", "--json", "Likes tea."], &env));
        let date = added["facts"][0]["date"].as_str().unwrap().to_string();
        assert!(date == before || date == day(), "{zone}: {date} is not today there ({before})");
        assert!(root.join(format!("archive/{date}.md")).exists());
        json(&memfold(root, &["consolidate", "--force", "--json"], &env));
        let memory = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
        assert!(memory.contains(&format!("\"first_seen\":\"{date}\",\"updated\":\"{date}\"")), "{zone}: {memory}");
        let id = memory.split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        json(&memfold(root, &["forget", "--json", &id], &env));
        let history = std::fs::read_to_string(root.join("consolidated/history.md")).unwrap();
        let until = history.split("\"valid_until\":\"").nth(1).unwrap().split('"').next().unwrap();
        assert!(until == date || until == day(), "{zone}: deleted on {until}, added on {date}");
    }
    let dir = init();
    let bad = memfold(dir.path(), &["status"], &[("MEMFOLD_TIME__ZONE", "Europe/Lisbon")]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("time.zone"), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// At the default log level a search prints its hits and nothing else: no lance deprecation
/// warnings, no "creating dataset" warning on the first open, no progress notes.
#[test]
fn search_prints_nothing_on_stderr_at_the_default_log_level() {
    let dir = init();
    let run = |args: &[&str]| {
        let out = crate::common::bin()
            .arg("--root")
            .arg(dir.path())
            .args(args)
            .env_remove("MEMFOLD_LOG")
            .env_remove("MEMFOLD_ROOT")
            .env_remove("MEMFOLD_LLM__BASE_URL")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (_, stderr) = run(&["search", "anything at all"]);
    assert_eq!(stderr, "", "first search on a fresh root");
    run(&["add", "Keeps bees on the roof of the garage.", "Plays the cello on Sundays."]);
    for args in [&["search", "bees"][..], &["search", "--json", "-k", "1", "cello"]] {
        let (stdout, stderr) = run(args);
        assert_eq!(stderr, "", "{args:?}");
        assert!(stdout.contains("bees") || stdout.contains("cello"), "{args:?}: {stdout}");
    }
    run(&["consolidate", "--force"]);
    let (stdout, stderr) = run(&["search", "bees on the roof"]);
    assert_eq!(stderr, "", "search after a pass");
    assert!(stdout.contains("entry"), "{stdout}");
}

/// `MEMORY.md` linked into an agent's prompt folder, `memory.md` kept in a notes folder: both
/// links stay, the files they point to get every write, and a hand edit there is kept.
#[cfg(unix)]
#[test]
fn linked_memory_files_stay_linked_and_get_every_write() {
    let dir = init();
    let root = dir.path();
    let elsewhere = tempfile::tempdir().unwrap();
    for (name, link) in [("MEMORY.md", "MEMORY.md"), ("memory.md", "consolidated/memory.md")] {
        std::fs::rename(root.join(link), elsewhere.path().join(name)).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(name), root.join(link)).unwrap();
    }
    assert!(memfold(root, &["add", "The user likes tea.", "The user lives in Porto."], &[]).status.success());
    assert!(memfold(root, &["consolidate", "--force"], &[]).status.success());
    let notes = elsewhere.path().join("memory.md");
    let text = std::fs::read_to_string(&notes).unwrap();
    assert!(text.contains("The user likes tea."), "{text}");
    std::fs::write(&notes, text.replace("likes tea", "likes green tea")).unwrap();
    assert!(memfold(root, &["add", "The user has a cat."], &[]).status.success());
    assert!(memfold(root, &["consolidate", "--force"], &[]).status.success());
    for (name, link) in [("MEMORY.md", "MEMORY.md"), ("memory.md", "consolidated/memory.md")] {
        assert!(std::fs::symlink_metadata(root.join(link)).unwrap().file_type().is_symlink(), "{link}");
        let text = std::fs::read_to_string(elsewhere.path().join(name)).unwrap();
        assert!(text.contains("The user has a cat.") && text.contains("likes green tea"), "{name}: {text}");
    }
    let verify = json(&memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["ok"], true, "{verify}");
}

#[test]
fn output_read_only_in_part_ends_the_command_quietly() {
    let dir = init();
    let root = dir.path();
    let texts: Vec<String> = (0..40).map(|i| format!("Fact number {i} about the quiet pipe")).collect();
    let mut args = vec!["add"];
    args.extend(texts.iter().map(String::as_str));
    assert!(memfold(root, &args, &[]).status.success());
    // As `memfold search q | true` and `memfold status | head -1`: the reader closes its end
    // before the command has written everything.
    for args in
        [vec!["search", "quiet pipe", "-k", "40"], vec!["status"], vec!["search", "quiet", "--json", "-k", "40"]]
    {
        let mut child = crate::common::bin()
            .arg("--root")
            .arg(root)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before a byte is written
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.code() == Some(0) || out.status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            out.status
        );
    }
}

#[test]
fn completions_parse_in_bash_and_every_command_has_a_man_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = dir.path().join("memfold.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let checked = std::process::Command::new("bash").arg("-n").arg(&script).output().unwrap();
    assert!(checked.status.success(), "bash -n: {}", String::from_utf8_lossy(&checked.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("complete") && text.contains("doctor") && text.contains("service"), "{text}");
    for shell in ["zsh", "fish"] {
        let out = bin().args(["completions", shell]).output().unwrap();
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }

    let pages = dir.path().join("man");
    let out = bin().arg("man").arg(&pages).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Every command, and every command of a command, from the same definitions the binary parses.
    use clap::CommandFactory;
    fn names(command: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        out.push(format!("{prefix}.1"));
        for sub in command.get_subcommands() {
            names(sub, &format!("{prefix}-{}", sub.get_name()), out);
        }
    }
    let mut wanted = Vec::new();
    names(&memfold::doors::cli::Cli::command(), "memfold", &mut wanted);
    assert!(wanted.len() > 30, "{wanted:?}");
    for page in &wanted {
        let text = std::fs::read_to_string(pages.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page} is roff");
    }
}

#[test]
fn runs_are_listed_newest_first_as_git_log_lists_commits_and_reverse_turns_them() {
    let dir = init();
    let mut made = Vec::new();
    for text in ["Has a dog named Rex.", "Plays the cello on Sundays."] {
        assert!(memfold(dir.path(), &["add", text], &[]).status.success());
        let report = json(&memfold(dir.path(), &["consolidate", "--force", "--json"], &[]));
        made.push(report["run"].as_str().expect("a run").to_string());
    }
    let ids = |args: &[&str]| -> Vec<String> {
        json(&memfold(dir.path(), args, &[]))["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&["runs", "--json"]), [made[1].clone(), made[0].clone()]);
    assert_eq!(ids(&["runs", "--reverse", "--json"]), made);
}
