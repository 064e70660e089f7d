//! The git binary, as `memfold sync` uses it: the root is the work tree, git stores the
//! versions and carries them to and from the remote, and memfold merges its own files itself
//! (`crate::planning::sync`). Nothing here writes a memory file: git only reads the work tree
//! (`add`), writes objects and moves refs.
//!
//! Every call runs `git -C ROOT` with the environment that could point it elsewhere removed
//! (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`: a sync run from inside another repository's
//! hook must not commit there) and with prompts off, so a remote that wants a password fails
//! with git's message instead of waiting for a terminal nobody reads.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The remote memfold syncs with.
pub const REMOTE: &str = "origin";
/// The branch memfold keeps memory on, locally and on the remote.
pub const BRANCH: &str = "main";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    #[error("git is not installed or not on PATH ({0}); sync needs it")]
    Missing(std::io::Error),
    #[error("git {args}: {message}")]
    Failed { args: String, message: String },
}

/// What a push came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    Done,
    /// The remote has commits this root has not merged (someone pushed first).
    Rejected(String),
}

/// A commit's tree as [`Git::files`] lists it.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// Regular files: path → blob id.
    pub files: BTreeMap<String, String>,
    /// Every other entry (symbolic links, submodules), by path.
    pub other: Vec<String>,
}

/// One repository: the root's `.git`.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
}

impl Git {
    pub fn new(dir: &Path) -> Git {
        Git { dir: dir.to_path_buf() }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(&self.dir)
            .args(["-c", "core.quotepath=off", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false"])
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_OBJECT_DIRECTORY")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        command
    }

    /// Run and return stdout; a non-zero exit is an error carrying stderr.
    fn run(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.command(args).output().map_err(GitError::Missing)?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(failed(args, &out.stderr))
    }

    /// Run and say whether it exited 0 (for questions git answers with its exit code).
    fn succeeds(&self, args: &[&str]) -> Result<bool, GitError> {
        let out = self.command(args).stdout(Stdio::null()).stderr(Stdio::null()).status().map_err(GitError::Missing)?;
        Ok(out.success())
    }

    /// Run a question git answers on stdout, or by failing when there is no answer (a key not
    /// set, a name that names nothing): the answer, trimmed, or None.
    fn answer(&self, args: &[&str]) -> Result<Option<String>, GitError> {
        let out = self.command(args).stderr(Stdio::null()).output().map_err(GitError::Missing)?;
        Ok(out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }

    /// Whether the root is a repository of its own (its own `.git`, not a parent's).
    pub fn is_repo(&self) -> bool {
        self.dir.join(".git").exists()
    }

    /// Make the root a repository on [`BRANCH`].
    pub fn init(&self) -> Result<(), GitError> {
        self.run(&["init", "--quiet", "--initial-branch", BRANCH]).map(drop)
    }

    /// The remote's address, if one is set.
    pub fn remote_url(&self) -> Result<Option<String>, GitError> {
        self.answer(&["config", "--get", &format!("remote.{REMOTE}.url")])
    }

    pub fn set_remote(&self, url: &str) -> Result<(), GitError> {
        match self.remote_url()? {
            Some(now) if now == url => Ok(()),
            Some(_) => self.run(&["remote", "set-url", REMOTE, url]).map(drop),
            None => self.run(&["remote", "add", REMOTE, url]).map(drop),
        }
    }

    /// The commit `HEAD` names, None before the first commit.
    pub fn head(&self) -> Result<Option<String>, GitError> {
        self.rev("HEAD")
    }

    fn rev(&self, name: &str) -> Result<Option<String>, GitError> {
        self.answer(&["rev-parse", "--verify", "--quiet", &format!("{name}^{{commit}}")])
    }

    /// The remote branch as last fetched, None if it was never fetched or does not exist.
    pub fn remote_head(&self) -> Result<Option<String>, GitError> {
        self.rev(&format!("refs/remotes/{REMOTE}/{BRANCH}"))
    }

    /// Fetch the remote branch; None when the remote has no such branch yet (a new remote).
    /// Every object fetched is checked (`fetch.fsckObjects`): a tree with a `..`, `.git` or
    /// a path with a slash in one name is refused before anything of it is kept.
    pub fn fetch(&self) -> Result<Option<String>, GitError> {
        let refspec = format!("+refs/heads/{BRANCH}:refs/remotes/{REMOTE}/{BRANCH}");
        let args = [
            "-c",
            "fetch.fsckObjects=true",
            "-c",
            "transfer.fsckObjects=true",
            "fetch",
            "--quiet",
            "--no-tags",
            REMOTE,
            refspec.as_str(),
        ];
        let out = self.command(&args).output().map_err(GitError::Missing)?;
        if !out.status.success() {
            let message = String::from_utf8_lossy(&out.stderr);
            if message.contains("couldn't find remote ref") {
                return Ok(None);
            }
            return Err(failed(&args, &out.stderr));
        }
        self.remote_head()
    }

    /// Push `HEAD` to the remote branch (never forced).
    pub fn push(&self) -> Result<Pushed, GitError> {
        let refspec = format!("HEAD:refs/heads/{BRANCH}");
        let args = ["push", "--quiet", "--porcelain", REMOTE, refspec.as_str()];
        let out = self.command(&args).output().map_err(GitError::Missing)?;
        if out.status.success() {
            return Ok(Pushed::Done);
        }
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // Refused because the branch moved: someone pushed first, or while this push ran (the
        // remote then cannot lock the ref). A refusal for another reason (a protected branch, a
        // hook) is tried again a few times and then reported with git's words.
        let moved = ["[rejected]", "non-fast-forward", "fetch first", "cannot lock ref", "[remote rejected]"];
        if moved.iter().any(|m| said.contains(m)) {
            return Ok(Pushed::Rejected(first_line(&said)));
        }
        Err(failed(&args, &out.stderr))
    }

    pub fn merge_base(&self, a: &str, b: &str) -> Result<Option<String>, GitError> {
        self.answer(&["merge-base", a, b])
    }

    /// Whether `a` is `b` or one of its ancestors.
    pub fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, GitError> {
        self.succeeds(&["merge-base", "--is-ancestor", a, b])
    }

    /// Commits on `a` not on `b`, and on `b` not on `a`.
    pub fn ahead_behind(&self, a: &str, b: &str) -> Result<(usize, usize), GitError> {
        let range = format!("{a}...{b}");
        let out = self.run(&["rev-list", "--left-right", "--count", &range])?;
        let mut counts = out.split_whitespace().map(|n| n.parse().unwrap_or(0));
        Ok((counts.next().unwrap_or(0), counts.next().unwrap_or(0)))
    }

    /// Every entry of a commit's tree: its regular files (path → blob id) and the paths of
    /// anything else (a symbolic link, a submodule), which a sync never writes.
    pub fn files(&self, commit: &str) -> Result<Tree, GitError> {
        let out = self.run(&["ls-tree", "-r", "-z", "--full-tree", commit])?;
        let mut tree = Tree::default();
        for record in out.split('\0').filter(|r| !r.is_empty()) {
            // `<mode> <type> <id>\t<path>`
            let Some((meta, path)) = record.split_once('\t') else { continue };
            let mut parts = meta.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("100644" | "100755"), Some("blob"), Some(id)) => {
                    tree.files.insert(path.to_string(), id.to_string());
                }
                _ => tree.other.push(path.to_string()),
            }
        }
        Ok(tree)
    }

    /// The contents of some blobs, read through one `git cat-file --batch`.
    pub fn blobs<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Result<HashMap<String, Vec<u8>>, GitError> {
        let ids: Vec<&str> = ids.into_iter().collect();
        let mut out = HashMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        let args = ["cat-file", "--batch"];
        let mut child = self
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(GitError::Missing)?;
        let mut stdin = child.stdin.take().expect("piped");
        let request: String = ids.iter().map(|id| format!("{id}\n")).collect();
        let writer = std::thread::spawn(move || stdin.write_all(request.as_bytes()));
        let mut bytes = Vec::new();
        child.stdout.take().expect("piped").read_to_end(&mut bytes).map_err(GitError::Missing)?;
        let _ = writer.join();
        let status = child.wait().map_err(GitError::Missing)?;
        if !status.success() {
            return Err(GitError::Failed { args: args.join(" "), message: format!("exited with {status}") });
        }
        // `<id> blob <size>\n<content>\n`, or `<id> missing\n`.
        let mut at = 0;
        while at < bytes.len() {
            let Some(nl) = bytes[at..].iter().position(|&b| b == b'\n') else { break };
            let header = String::from_utf8_lossy(&bytes[at..at + nl]).into_owned();
            at += nl + 1;
            let mut parts = header.split_whitespace();
            let (Some(id), Some(kind)) = (parts.next(), parts.next()) else { break };
            if kind == "missing" {
                continue;
            }
            let size: usize = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            let end = (at + size).min(bytes.len());
            out.insert(id.to_string(), bytes[at..end].to_vec());
            at = end + 1;
        }
        Ok(out)
    }

    /// Stage every file of the work tree that `.gitignore` does not leave out.
    pub fn add_all(&self) -> Result<(), GitError> {
        self.run(&["add", "--all", "--", "."]).map(drop)
    }

    /// Whether the work tree differs from `HEAD` in a file `.gitignore` does not leave out.
    pub fn changed(&self) -> Result<bool, GitError> {
        Ok(!self.run(&["status", "--porcelain", "--untracked-files=all"])?.trim().is_empty())
    }

    /// The tree the index holds now.
    pub fn write_tree(&self) -> Result<String, GitError> {
        Ok(self.run(&["write-tree"])?.trim().to_string())
    }

    pub fn tree_of(&self, commit: &str) -> Result<String, GitError> {
        let spec = format!("{commit}^{{tree}}");
        Ok(self.run(&["rev-parse", &spec])?.trim().to_string())
    }

    /// Make a commit of `tree` with these parents and point the branch at it. The author is
    /// git's configured one, or `memfold` when none is configured on this machine.
    pub fn commit(&self, tree: &str, parents: &[&str], message: &str) -> Result<String, GitError> {
        let mut args = vec!["commit-tree", tree, "-m", message];
        for parent in parents {
            args.extend(["-p", parent]);
        }
        let mut command = self.command(&args);
        if !self.succeeds(&["var", "GIT_COMMITTER_IDENT"])? {
            let host = crate::sys::host::name();
            let email = format!("memfold@{host}");
            for (key, value) in [
                ("GIT_AUTHOR_NAME", "memfold"),
                ("GIT_COMMITTER_NAME", "memfold"),
                ("GIT_AUTHOR_EMAIL", email.as_str()),
                ("GIT_COMMITTER_EMAIL", email.as_str()),
            ] {
                command.env(key, value);
            }
        }
        let out = command.output().map_err(GitError::Missing)?;
        if !out.status.success() {
            return Err(failed(&args, &out.stderr));
        }
        let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
        self.move_branch(&commit)?;
        Ok(commit)
    }

    /// Point the branch (and so `HEAD`) at `commit`; the work tree is left as it is.
    pub fn move_branch(&self, commit: &str) -> Result<(), GitError> {
        let branch = format!("refs/heads/{BRANCH}");
        self.run(&["update-ref", "-m", "memfold sync", &branch, commit])?;
        self.run(&["symbolic-ref", "HEAD", &branch]).map(drop)
    }

    /// Make the index match `HEAD` after the branch moved under a work tree that already holds
    /// its files.
    pub fn reset_index(&self) -> Result<(), GitError> {
        self.run(&["read-tree", "HEAD"]).map(drop)
    }
}

fn failed(args: &[&str], stderr: &[u8]) -> GitError {
    let message = String::from_utf8_lossy(stderr);
    // The verb, past any `-c key=value` before it.
    let mut words = args.iter().copied();
    let verb = std::iter::from_fn(|| match words.next()? {
        "-c" => words.next().map(|_| ""),
        word => Some(word),
    })
    .find(|w| !w.is_empty())
    .unwrap_or("");
    GitError::Failed { args: verb.to_string(), message: first_line(&message) }
}

/// The first non-empty line of what git said, without its `error:`/`fatal:` prefix noise kept
/// short enough for a status line.
fn first_line(said: &str) -> String {
    let line = said.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("failed with no message");
    line.chars().take(300).collect()
}
