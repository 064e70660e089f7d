//! A home of spaces for a test, made and served by the real binary: `memfold --home H init`,
//! `memfold --home H --space S init` per space, `[spaces] shared` in the home's `memfold.toml`,
//! and `memfold --home H serve`.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use super::daemon::{Daemon, start};

/// A home in a temp dir, with a place for daemon logs next to it.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    /// A home with these spaces, `shared` among them listed in `[spaces] shared`, and `extra`
    /// lines added to the home's `memfold.toml` (under `[spaces]`).
    pub fn new(spaces: &[&str], shared: &[&str], extra: &str) -> Home {
        let home = Home { dir: tempfile::tempdir().unwrap() };
        home.ok(None, &["init"]);
        for space in spaces {
            home.ok(Some(space), &["init"]);
        }
        let shared: Vec<String> = shared.iter().map(|s| format!("{s:?}")).collect();
        let toml = format!("[spaces]\nshared = [{}]\n{extra}", shared.join(", "));
        std::fs::write(home.path().join("memfold.toml"), toml).unwrap();
        home
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The root of space `name`.
    pub fn space(&self, name: &str) -> PathBuf {
        self.path().join("spaces").join(name)
    }

    /// `memfold --home H [--space S]`, on the built-in embedder, with no LLM.
    pub fn command(&self, space: Option<&str>) -> Command {
        let mut command = super::bin();
        command.arg("--home").arg(self.path());
        if let Some(space) = space {
            command.arg("--space").arg(space);
        }
        for var in ["MEMFOLD_ROOT", "MEMFOLD_CONFIG", "MEMFOLD_HOME", "MEMFOLD_SPACE", "MEMFOLD_LLM__BASE_URL"] {
            command.env_remove(var);
        }
        command.env("MEMFOLD_LOG", "warn");
        command
    }

    pub fn run(&self, space: Option<&str>, args: &[&str]) -> Output {
        self.command(space).args(args).output().expect("memfold runs")
    }

    /// Run a command that must succeed; its stdout.
    pub fn ok(&self, space: Option<&str>, args: &[&str]) -> String {
        let out = self.run(space, args);
        assert!(out.status.success(), "memfold {args:?} in {space:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run a `--json` command that must succeed; its document.
    pub fn json(&self, space: Option<&str>, args: &[&str]) -> Value {
        let text = self.ok(space, args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// The token of a space, or the home's (the operator's) for None.
    pub fn token(&self, space: Option<&str>) -> String {
        self.ok(space, &["token"]).trim().to_string()
    }

    /// `memfold --home H serve` with these extra environment variables, once it answers; its
    /// token is the operator's.
    pub async fn serve(&self, env: &[(&str, &str)]) -> Daemon {
        let mut command = self.command(None);
        command.envs(env.iter().copied());
        let mut daemon = start(command, &self.path(), self.dir.path()).await;
        daemon.token = Some(self.token(None));
        daemon
    }
}
