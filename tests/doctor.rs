//! `memfold doctor` and `memfold service install|uninstall`, run as a person runs them, with
//! HOME in a temp folder.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common::bin;
use crate::common::daemon::Fixture;

/// `memfold --root ROOT ARGS` with HOME (and Codex's folder) in `home`.
fn run(root: &Path, home: &Path, args: &[&str]) -> Output {
    run_with(root, home, args, &[])
}

fn run_with(root: &Path, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    bin()
        .envs(env.iter().copied())
        .arg("--root")
        .arg(root)
        .args(args)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("MEMFOLD_ROOT")
        .current_dir(home)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn doctor(root: &Path, home: &Path) -> (i32, Value) {
    doctor_with(root, home, &[])
}

fn doctor_with(root: &Path, home: &Path, env: &[(&str, &str)]) -> (i32, Value) {
    let out = run_with(root, home, &["doctor", "--json"], env);
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), answer)
}

fn failed(answer: &Value) -> Vec<String> {
    answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| {
            assert!(c["fix"].as_str().is_some_and(|f| !f.is_empty()), "a failure without its fix: {c}");
            c["name"].as_str().unwrap().to_string()
        })
        .collect()
}

#[tokio::test]
async fn doctor_passes_a_healthy_set_up_and_names_exactly_what_broke_each_with_its_fix() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    stdout(&run(&root, &home, &["setup", "claude-code"]));
    let daemon = fixture.serve(&[]).await;
    let (code, answer) = doctor(&root, &home);
    assert_eq!((code, failed(&answer)), (0, Vec::<String>::new()), "{answer:#}");
    assert_eq!(answer["ok"], true);
    let names: Vec<&str> = answer["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    for name in [
        "memfold",
        "configuration",
        "memory",
        "daemon",
        "last pass",
        "disk",
        "secrets",
        "token",
        "privacy",
        "embedder",
        "hooks claude-code",
        "mcp claude-code",
        "hooks codex",
        "mcp codex",
        "llm",
        "service",
    ] {
        assert!(names.contains(&name), "{name} checked: {names:?}");
    }

    // The daemon stopped, the hooks pointing at a memfold that is gone, the token readable by all.
    daemon.stop().await;
    let settings = home.join(".claude/settings.json");
    let exe = bin().get_program().to_owned();
    let exe = PathBuf::from(exe).canonicalize().unwrap();
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(text.contains(exe.to_str().unwrap()), "{text}");
    std::fs::write(&settings, text.replace(exe.to_str().unwrap(), "/nonexistent/bin/memfold")).unwrap();
    let token = root.join(".memfold/token");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, answer) = doctor(&root, &home);
    assert_eq!(code, 1, "{answer:#}");
    assert_eq!(failed(&answer), ["daemon", "token", "hooks claude-code"], "{answer:#}");
    let out = run(&root, &home, &["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("chmod 600 {}", token.display())), "{text}");
    assert!(text.contains("/nonexistent/bin/memfold") && text.contains("memfold setup claude-code"), "{text}");

    // An LLM whose server is not there fails; one that is takes connections (nothing is sent).
    let (_, answer) = doctor_with(&root, &home, &[("MEMFOLD_LLM__BASE_URL", "http://127.0.0.1:9/v1")]);
    assert_eq!(failed(&answer), ["daemon", "token", "llm", "hooks claude-code"], "{answer:#}");
    let fake = memfold::testkit::FakeOpenAi::start_in_thread();
    let url = fake.base_url();
    let (_, answer) = doctor_with(&root, &home, &[("MEMFOLD_LLM__BASE_URL", url.as_str())]);
    assert_eq!(failed(&answer), ["daemon", "token", "hooks claude-code"], "{answer:#}");
    assert_eq!(fake.chat_calls(), 0);

    // A warning is not a failure: secrets kept as they came.
    std::fs::write(root.join("memfold.toml"), "[ingest]\nsecrets = \"allow\"\n").unwrap();
    std::fs::set_permissions(root.join("memfold.toml"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let (_, answer) = doctor(&root, &home);
    let secrets = answer["checks"].as_array().unwrap().iter().find(|c| c["name"] == "secrets").unwrap().clone();
    assert_eq!((secrets["level"].as_str(), secrets["ok"].as_bool()), (Some("warn"), Some(true)), "{secrets}");
    assert_eq!(failed(&answer), ["daemon", "token", "hooks claude-code"]);

    // A configuration that does not load is the one line, naming the key.
    std::fs::write(root.join("memfold.toml"), "[hooks]\nprompt_k = 0\n").unwrap();
    let (code, answer) = doctor(&root, &home);
    assert_eq!((code, failed(&answer)), (1, vec!["configuration".to_string()]));
    assert!(answer["checks"][1]["detail"].as_str().unwrap().contains("hooks.prompt_k"), "{answer}");
}

#[test]
fn service_install_writes_a_unit_systemd_accepts_and_a_plist_that_parses_and_uninstall_leaves_nothing() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let exe = PathBuf::from(bin().get_program()).canonicalize().unwrap();

    // Nothing installed: nothing to start.
    let out = run(&root, &home, &["service", "start", "--manager", "systemd"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("service install"));

    // A dry run prints the unit and the commands and writes nothing.
    let dry = stdout(&run(&root, &home, &["service", "install", "--manager", "systemd", "--dry-run"]));
    assert!(
        dry.contains(&format!("ExecStart=\"{}\" \"--root\" \"{}\" \"serve\"", exe.display(), root.display())),
        "{dry}"
    );
    assert!(dry.contains("would run: systemctl --user enable memfold.service"), "{dry}");
    assert_eq!(files(&home), Vec::<PathBuf>::new());

    // systemd, the file alone: a unit systemd-analyze accepts, and an empty private settings file.
    let said = stdout(&run(&root, &home, &["service", "install", "--manager", "systemd", "--no-start"]));
    let unit = home.join(".config/systemd/user/memfold.service");
    assert!(said.contains(&format!("wrote {}", unit.display())), "{said}");
    let env = home.join(".config/memfold/memfold.env");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&env).unwrap().permissions().mode() & 0o777, 0o600);
    if let Ok(out) = std::process::Command::new("systemd-analyze").arg("verify").arg(&unit).output() {
        assert!(out.status.success(), "systemd-analyze verify: {}", String::from_utf8_lossy(&out.stderr));
    }
    let again = stdout(&run(&root, &home, &["service", "install", "--manager", "systemd", "--no-start"]));
    assert!(again.contains("unchanged"), "{again}");
    for (action, command) in [
        ("start", "systemctl --user start memfold.service"),
        ("restart", "systemctl --user restart memfold.service"),
        ("logs", "journalctl --user -u memfold.service -n 100 --no-pager"),
    ] {
        let said = stdout(&run(&root, &home, &["service", action, "--manager", "systemd", "--dry-run"]));
        assert_eq!(said.trim(), format!("would run: {command}"), "{action}");
    }

    // launchd: a property list with absolute paths.
    stdout(&run(&root, &home, &["service", "install", "--manager", "launchd", "--no-start"]));
    let plist = home.join("Library/LaunchAgents/com.memfold.plist");
    let read = std::process::Command::new("python3")
        .args(["-c", "import plistlib, sys, json; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))"])
        .arg(&plist)
        .output();
    if let Ok(out) = read {
        assert!(out.status.success(), "plistlib: {}", String::from_utf8_lossy(&out.stderr));
        let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            parsed["ProgramArguments"],
            serde_json::json!([exe.to_str().unwrap(), "--root", root.to_str().unwrap(), "serve"])
        );
        assert_eq!(parsed["StandardErrorPath"], home.join("Library/Logs/memfold.log").to_str().unwrap());
        assert_eq!(parsed["Label"], "com.memfold");
    }

    // A unit a person wrote is neither replaced nor removed.
    let theirs = fixture.dir.path().join("theirs");
    std::fs::create_dir_all(theirs.join(".config/systemd/user")).unwrap();
    std::fs::write(theirs.join(".config/systemd/user/memfold.service"), "[Service]\nExecStart=/usr/bin/true\n")
        .unwrap();
    for action in ["install", "uninstall"] {
        let out = run(&root, &theirs, &["service", action, "--manager", "systemd", "--no-start"]);
        assert_eq!(out.status.code(), Some(2), "{action}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("not written by memfold"));
    }
    assert_eq!(
        std::fs::read_to_string(theirs.join(".config/systemd/user/memfold.service")).unwrap(),
        "[Service]\nExecStart=/usr/bin/true\n"
    );

    // Uninstall leaves nothing it wrote.
    stdout(&run(&root, &home, &["service", "uninstall", "--manager", "systemd", "--no-start"]));
    stdout(&run(&root, &home, &["service", "uninstall", "--manager", "launchd", "--no-start"]));
    assert_eq!(files(&home), Vec::<PathBuf>::new());
}

#[test]
fn install_sh_puts_memfold_in_the_prefix_with_its_service_and_uninstall_takes_both_out() {
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix, root) = (dir.path().join("home"), dir.path().join("prefix"), dir.path().join("memory"));
    std::fs::create_dir_all(&home).unwrap();
    let exe = PathBuf::from(bin().get_program()).canonicalize().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    let install = |args: &[&str]| {
        let out = std::process::Command::new("sh")
            .arg(&script)
            .args(["--prefix", prefix.to_str().unwrap(), "--root", root.to_str().unwrap()])
            .args(args)
            .env("HOME", &home)
            .env("MEMFOLD_INSTALL_BINARY", &exe)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("MEMFOLD_ROOT")
            .output()
            .unwrap();
        stdout(&out)
    };
    let dry = install(&["--service", "--dry-run"]);
    assert!(dry.contains("would run: install -m 755") && dry.contains("service install"), "{dry}");
    assert!(!prefix.exists() && !root.exists() && files(&home).is_empty(), "a dry run writes nothing");

    assert!(install(&["--help"]).contains("--prefix DIR"));
    let said = install(&["--service", "--no-start", "--no-minilm"]);
    let installed = prefix.join("bin/memfold");
    assert!(installed.is_file(), "{said}");
    assert!(root.join("archive").is_dir(), "the memory is made");
    let unit = std::fs::read_to_string(home.join(".config/systemd/user/memfold.service")).unwrap();
    assert!(
        unit.contains(&format!("ExecStart=\"{}\" \"--root\" \"{}\" \"serve\"", installed.display(), root.display())),
        "{unit}"
    );

    assert!(prefix.join("share/bash-completion/completions/memfold").is_file());
    assert!(prefix.join("share/man/man1/memfold-doctor.1").is_file());

    let said = install(&["--uninstall", "--no-start"]);
    assert!(!installed.exists(), "{said}");
    assert!(files(&prefix).is_empty(), "{:?}", files(&prefix));
    assert!(files(&home).is_empty(), "{:?}", files(&home));
    assert!(root.join("archive").is_dir(), "the memory stays");
}
