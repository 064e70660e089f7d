//! A home of spaces: one folder that holds many memory roots, for one daemon to serve.
//!
//! ```text
//! <home>/
//!   memfold.toml          the settings every space shares ([spaces], [llm], [embedding], …)
//!   .memfold/             the home's own state: its token (the operator's), the daemon's
//!                         serve lock and address, the operator's sign-in codes
//!   spaces/<name>/        one memory root per space, exactly as a root made by `memfold init`
//! ```
//!
//! A space is a root with every guarantee a root has: its own files, locks, index, token,
//! history, plans and runs. Nothing here reads or writes inside a space but its creation.

use std::path::{Path, PathBuf};

use super::Root;
use super::project::Project;

/// Longest space name, in bytes.
pub const MAX_NAME: usize = 64;

/// Whether `name` may name a space: 1 to 64 of `a-z 0-9 . _ -`, starting with a letter or
/// digit (so it is a plain folder name everywhere, never `.`, `..` or hidden).
pub fn check_name(name: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if starts && name.len() <= MAX_NAME && name.chars().all(plain) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a space name: 1 to {MAX_NAME} of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"
        ))
    }
}

/// The file of a space that names the project it holds the memory of.
fn project_file(root: &Root) -> PathBuf {
    root.state_dir().join("project")
}

/// A space name made from a project folder's name: lower case, other characters as `-`.
pub fn project_name(project: &Path) -> String {
    let folder = project.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let mut name: String = folder
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_') { c } else { '-' })
        .collect();
    name = name.trim_start_matches(['.', '_', '-']).to_string();
    name.truncate(MAX_NAME);
    if name.is_empty() { "project".to_string() } else { name }
}

/// The project a folder belongs to: the top of its git work tree (the nearest folder up that
/// holds `.git`), else the folder itself. (The repository it belongs to, whichever work tree or
/// clone: [`Project`].)
pub fn project_of(dir: &Path) -> PathBuf {
    dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(dir).to_path_buf()
}

/// A space name made from a remote's address (`github.com/org/app` → `github.com-org-app`).
pub fn remote_name(address: &str) -> String {
    let mut name: String = address
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_') { c } else { '-' })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches(['.', '_', '-']);
    let mut name = name.to_string();
    if name.len() > MAX_NAME {
        // The end of an address names the project; the host is the part to lose.
        name = name[name.len() - MAX_NAME..].trim_start_matches(['.', '_', '-']).to_string();
    }
    if name.is_empty() { "project".to_string() } else { name }
}

/// Where a project's memory is kept in a home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectSpace {
    pub name: String,
    /// Whether the space exists yet.
    pub exists: bool,
    /// Other spaces that hold memory of the same project: made per work tree or per clone by
    /// an older memfold (`memfold spaces --merge` joins them).
    pub also: Vec<String>,
}

/// The folders and files of a home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    dir: PathBuf,
}

impl Home {
    pub fn new(dir: impl Into<PathBuf>) -> Home {
        Home { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn spaces_dir(&self) -> PathBuf {
        self.dir.join("spaces")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.join(".memfold")
    }

    /// Where a space merged into another is set aside, whole, by name and time.
    pub fn merged_dir(&self, space: &str, stamp: &str) -> PathBuf {
        self.state_dir().join("merged").join(format!("{space}-{stamp}"))
    }

    /// The operator's bearer token: it reaches every space, through `/spaces/<name>/`.
    pub fn token_file(&self) -> PathBuf {
        self.state_dir().join("token")
    }

    pub fn serve_lock(&self) -> PathBuf {
        self.state_dir().join("serve.lock")
    }

    /// Where the home's daemon listens ([`super::listening`]).
    pub fn listening_file(&self) -> PathBuf {
        self.state_dir().join("serve.json")
    }

    /// The operator's sign-in codes for the review page.
    pub fn codes_dir(&self) -> PathBuf {
        self.state_dir().join("ui-codes")
    }

    /// The root of space `name` (checked, not necessarily made yet).
    pub fn space(&self, name: &str) -> Result<Root, String> {
        check_name(name)?;
        Ok(Root::new(self.spaces_dir().join(name)))
    }

    /// The space that holds the memory of `project`: the one that records its identity
    /// (`.memfold/project`); else one an older memfold made for one of its folders, adopted
    /// (its record is brought up to date by [`Home::record_project`]); else a new one, named from
    /// the remote (`github.com-org-app`) or the main work tree's folder, with a short hash of the
    /// identity when another project has that name.
    pub fn space_for_project(&self, project: &Project) -> ProjectSpace {
        let identity = project.identity();
        let base = match &project.remote {
            Some(remote) => remote_name(remote),
            None => project_name(&project.main),
        };
        let suffixed = format!("{}-{}", &base[..base.len().min(MAX_NAME - 7)], short_hash(&identity));
        let record = |name: &str| -> Option<Option<String>> {
            let root = self.space(name).ok()?;
            if !root.is_initialized() {
                return None;
            }
            match std::fs::read_to_string(project_file(&root)) {
                Ok(recorded) => Some(Some(recorded.trim_end_matches('\n').to_string())),
                Err(_) => Some(None),
            }
        };
        // What an older memfold recorded: a folder's path, its space named after the folder.
        let old_style: Vec<(String, String)> = project
            .folders()
            .into_iter()
            .map(|folder| folder.to_string_lossy().into_owned())
            .flat_map(|path| {
                let name = project_name(Path::new(&path));
                let hashed = format!("{}-{}", &name[..name.len().min(MAX_NAME - 7)], short_hash(&path));
                [(name, path.clone()), (hashed, path)]
            })
            .collect();
        // A record of one of this project's folders: its path (older memfold), or `path:` and
        // the path (before the repository had a remote).
        let of_a_folder = |recorded: &str| {
            let path = recorded.strip_prefix("path:").unwrap_or(recorded);
            old_style.iter().any(|(_, folder)| folder == path)
        };
        let mut found: Vec<String> = Vec::new();
        for name in [&base, &suffixed] {
            if let Some(recorded) = record(name) {
                let ours = recorded.as_deref().is_none_or(|r| r == identity || of_a_folder(r));
                if ours {
                    found.push(name.clone());
                }
            }
        }
        for (name, _) in &old_style {
            if !found.contains(name) && record(name).is_some_and(|r| r.as_deref().is_some_and(of_a_folder)) {
                found.push(name.clone());
            }
        }
        if found.is_empty() {
            // A clone elsewhere, or a space kept under an older name: any space that records
            // this identity, or a folder that is (still) this project.
            let same = |recorded: &str| {
                recorded == identity || {
                    let path = Path::new(recorded.strip_prefix("path:").unwrap_or(recorded));
                    !recorded.starts_with("remote:") && path.is_dir() && Project::of(path).identity() == identity
                }
            };
            found
                .extend(self.names().into_iter().filter(|n| record(n).is_some_and(|r| r.as_deref().is_some_and(same))));
        }
        if let Some((first, also)) = found.split_first() {
            return ProjectSpace { name: first.clone(), exists: true, also: also.to_vec() };
        }
        let taken = |name: &str| self.space(name).is_ok_and(|r| r.is_initialized());
        let name = if taken(&base) { suffixed } else { base };
        ProjectSpace { exists: taken(&name), name, also: Vec::new() }
    }

    /// Record that space `name` holds the memory of the project known as `identity`
    /// ([`Project::identity`]); a record an older memfold wrote (a folder's path) is replaced.
    pub fn record_project(&self, name: &str, identity: &str) -> std::io::Result<()> {
        let root = self.space(name).map_err(std::io::Error::other)?;
        let file = project_file(&root);
        if std::fs::read_to_string(&file).is_ok_and(|t| t.trim_end_matches('\n') == identity) {
            return Ok(());
        }
        super::atomic::write_atomic(&file, format!("{identity}\n").as_bytes(), None).map_err(std::io::Error::other)
    }

    /// Refuse a folder that is a memory root: a root's files are not spaces, and serving it as
    /// a home would show none of them.
    pub fn check_not_a_root(&self) -> Result<(), String> {
        match Root::new(&self.dir).is_initialized() {
            false => Ok(()),
            true => Err(format!(
                "{} is a memory root, not a home: use it with --root, or bring it into a home as a space \
                 (memfold --home HOME init && mv {} HOME/spaces/NAME)",
                self.dir.display(),
                self.dir.display()
            )),
        }
    }

    /// Make the home's folders (existing ones are left alone).
    pub fn init(&self) -> std::io::Result<()> {
        crate::sys::access::create_dir(&self.dir)?;
        crate::sys::access::create_dir(&self.state_dir())?;
        crate::sys::access::create_dir(&self.spaces_dir())
    }

    /// The names of the spaces made so far (folders of `spaces/` with a space's name that are
    /// initialised roots), sorted.
    pub fn names(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.spaces_dir()) else { return Vec::new() };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| check_name(name).is_ok())
            .filter(|name| Root::new(self.spaces_dir().join(name)).check_initialized().is_ok())
            .collect();
        names.sort();
        names
    }
}

/// Six hex digits of a text's sha256.
fn short_hash(text: &str) -> String {
    sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(text.as_bytes()))
        .iter()
        .take(3)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_names_are_plain_folder_names() {
        for good in ["me", "team", "proj-42", "a.b_c", "0"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_NAME + 1);
        for bad in ["", ".", "..", ".hidden", "-x", "Me", "a/b", "a b", "../x", "é", long.as_str()] {
            assert!(check_name(bad).unwrap_err().contains("not a space name"), "{bad}");
        }
    }

    #[test]
    fn a_home_lists_the_spaces_made_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        home.init().unwrap();
        assert!(home.spaces_dir().is_dir() && home.names().is_empty());
        for name in ["work", "me"] {
            home.space(name).unwrap().init().unwrap();
        }
        std::fs::create_dir_all(home.spaces_dir().join("not-made")).unwrap();
        std::fs::create_dir_all(home.spaces_dir().join("Bad Name")).unwrap();
        assert_eq!(home.names(), ["me", "work"]);
        assert!(home.space("../etc").is_err());
    }
}
