//! The project a folder belongs to: its git repository, whichever work tree or clone the folder
//! is in. Read from the files git keeps (`.git`, `commondir`, `config`), without running git: a
//! hook asks on every event.
//!
//! - A work tree's top is the nearest folder up that holds `.git` (a folder, or for a linked
//!   work tree and a submodule, a file naming the git folder).
//! - The work trees of one repository share its common git folder; the main work tree is the
//!   folder that holds it.
//! - A repository with an `origin` remote is known by it, normalised (`github.com/org/app`: the
//!   ssh and https forms of one address read the same), so two clones of one remote, in two
//!   folders or on two machines, are one project; without one, by its main work tree.
//! - A folder outside git is a project of its own.

use std::path::{Path, PathBuf};

/// What a folder belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The top of the folder's work tree (a linked work tree's own), else the folder.
    pub top: PathBuf,
    /// The repository's main work tree (the folder that holds its common git folder); the same
    /// as `top` outside git and in the main work tree.
    pub main: PathBuf,
    /// The repository's `origin`, normalised, when it has one.
    pub remote: Option<String>,
}

impl Project {
    /// The project of `dir`.
    pub fn of(dir: &Path) -> Project {
        let Some(top) = dir.ancestors().find(|d| d.join(".git").exists()) else {
            return Project { top: dir.to_path_buf(), main: dir.to_path_buf(), remote: None };
        };
        let top = top.to_path_buf();
        let Some(common) = common_dir(&top) else {
            return Project { main: top.clone(), top, remote: None };
        };
        // The main work tree holds the common folder as its `.git`; a bare repository's
        // work trees have none, and are known by the common folder itself.
        let main = match common.file_name().is_some_and(|n| n == ".git") {
            true => common.parent().map_or_else(|| top.clone(), Path::to_path_buf),
            false => common.clone(),
        };
        let remote = std::fs::read_to_string(common.join("config"))
            .ok()
            .and_then(|c| origin(&c))
            .and_then(|u| normalise_remote(&u));
        Project { top, main, remote }
    }

    /// What the project's space records, and compares to find it again: `remote:<address>`,
    /// else `path:<main work tree>`.
    pub fn identity(&self) -> String {
        match &self.remote {
            Some(remote) => format!("remote:{remote}"),
            None => format!("path:{}", self.main.to_string_lossy()),
        }
    }

    /// The project's name as people say it: the remote's last part, else the main work tree's
    /// folder.
    pub fn name(&self) -> String {
        match &self.remote {
            Some(remote) => remote.rsplit('/').next().unwrap_or(remote).to_string(),
            None => self.main.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        }
    }

    /// The folders this project's memory may have been kept under by an older memfold, which
    /// named a space after the folder a hook ran in: the main work tree and this one.
    pub fn folders(&self) -> Vec<&Path> {
        let mut out = vec![self.main.as_path()];
        if self.top != self.main {
            out.push(&self.top);
        }
        out
    }
}

/// The common git folder of the work tree at `top`: its `.git` folder, or for a linked work
/// tree the folder its `.git` file points at, followed to the repository's own (`commondir`).
fn common_dir(top: &Path) -> Option<PathBuf> {
    let dot_git = top.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let pointed = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let gitdir = top.join(pointed); // an absolute `pointed` replaces `top`
    let common = match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(rel) => gitdir.join(rel.trim()),
        Err(_) => gitdir, // a submodule: its git folder is its own
    };
    Some(std::fs::canonicalize(&common).unwrap_or(common))
}

/// `[remote "origin"] url = …` of a git config.
fn origin(config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            let section: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            in_origin = section == "[remote\"origin\"]";
            continue;
        }
        if in_origin
            && let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("url")
        {
            return Some(value.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// A remote's address as host and path, the same for its ssh and https forms:
/// `git@github.com:Org/App.git`, `ssh://git@github.com:22/org/app`, `https://me@github.com/org/app/`
/// → `github.com/org/app`. A local path (`/srv/git/app.git`, `file:///srv/git/app`) keeps its
/// path. None for an empty address.
pub fn normalise_remote(url: &str) -> Option<String> {
    let url = url.trim();
    if url.is_empty() {
        return None;
    }
    let (host, path) = if let Some((scheme, rest)) = url.split_once("://") {
        if scheme.eq_ignore_ascii_case("file") {
            (String::new(), rest.to_string())
        } else {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host = host.split_once(':').map_or(host, |(h, _)| h); // a port
            (host.to_string(), path.to_string())
        }
    } else if let Some((before, path)) = url.split_once(':').filter(|(b, _)| !b.contains('/') && !b.is_empty()) {
        // scp-like: [user@]host:path
        let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
        (host.to_string(), path.to_string())
    } else {
        (String::new(), url.to_string())
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    let address = match host.is_empty() {
        true => path.to_string(),
        false => format!("{}/{}", host.to_lowercase(), path.trim_start_matches('/').to_lowercase()),
    };
    (!address.is_empty()).then_some(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_of_one_remote_read_the_same() {
        for url in [
            "git@github.com:Org/App.git",
            "ssh://git@github.com/org/app.git",
            "ssh://git@github.com:22/org/app",
            "https://github.com/org/app.git",
            "https://me@github.com/org/app/",
            "http://GitHub.com/Org/App",
        ] {
            assert_eq!(normalise_remote(url).as_deref(), Some("github.com/org/app"), "{url}");
        }
        assert_eq!(normalise_remote("/srv/git/app.git").as_deref(), Some("/srv/git/app"));
        assert_eq!(normalise_remote("file:///srv/git/app").as_deref(), Some("/srv/git/app"));
        assert_eq!(normalise_remote("../app.git").as_deref(), Some("../app"));
        assert_eq!(normalise_remote(""), None);
        assert_ne!(normalise_remote("git@gitlab.com:org/app.git"), normalise_remote("git@github.com:org/app.git"));
    }

    #[test]
    fn origin_is_read_from_a_git_config() {
        let config = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = git@github.com:up/app.git\n[remote \"origin\"]\n\turl = git@github.com:me/app.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n";
        assert_eq!(origin(config).as_deref(), Some("git@github.com:me/app.git"));
        assert_eq!(origin("[core]\n\tbare = false\n"), None);
    }

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn worktrees_and_clones_of_one_repository_are_one_project() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let app = dir.join("app");
        std::fs::create_dir_all(app.join("src")).unwrap();
        git(&app, &["init", "--quiet"]);
        git(&app, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "first"]);
        git(&app, &["worktree", "add", "--quiet", "../app-feature"]);
        let main = Project::of(&app.join("src"));
        let feature = Project::of(&dir.join("app-feature"));
        assert_eq!((main.top.as_path(), main.main.as_path()), (app.as_path(), app.as_path()));
        assert_eq!(feature.top, dir.join("app-feature"));
        assert_eq!(feature.main, app, "a linked work tree's main work tree");
        assert_eq!(feature.identity(), main.identity());
        assert_eq!(main.identity(), format!("path:{}", app.display()));
        // With an origin, known by it: a second clone elsewhere is the same project.
        git(&app, &["remote", "add", "origin", "git@github.com:Me/App.git"]);
        let elsewhere = dir.join("other/app-copy");
        std::fs::create_dir_all(&elsewhere).unwrap();
        git(&elsewhere, &["init", "--quiet"]);
        git(&elsewhere, &["remote", "add", "origin", "https://github.com/me/app"]);
        assert_eq!(Project::of(&app).identity(), "remote:github.com/me/app");
        assert_eq!(Project::of(&dir.join("app-feature")).identity(), "remote:github.com/me/app");
        assert_eq!(Project::of(&elsewhere).identity(), "remote:github.com/me/app");
        // A folder outside git is its own project.
        let plain = dir.join("notes");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(Project::of(&plain), Project { top: plain.clone(), main: plain.clone(), remote: None });
    }
}
