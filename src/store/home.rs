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
    let mut name: String =
        folder.chars().map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_') { c } else { '-' }).collect();
    name = name.trim_start_matches(['.', '_', '-']).to_string();
    name.truncate(MAX_NAME);
    if name.is_empty() { "project".to_string() } else { name }
}

/// The project a folder belongs to: the top of its git work tree (the nearest folder up that
/// holds `.git`), else the folder itself.
pub fn project_of(dir: &Path) -> PathBuf {
    dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(dir).to_path_buf()
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

    /// The space that holds the memory of the project at `project` (a folder): named after the
    /// folder, with a short hash of its path when another project already has that name. The
    /// space records its project (`.memfold/project`), so the same project always finds the
    /// same space; a space made by hand under that name is adopted by the first project to
    /// use it. Whether the space exists yet is the second value.
    pub fn space_for_project(&self, project: &Path) -> (String, bool) {
        let base = project_name(project);
        let path = project.to_string_lossy().into_owned();
        let hash: String = sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(path.as_bytes()))
            .iter()
            .take(3)
            .map(|b| format!("{b:02x}"))
            .collect();
        let suffixed = format!("{}-{hash}", &base[..base.len().min(MAX_NAME - 7)]);
        for name in [base, suffixed.clone()] {
            let Ok(root) = self.space(&name) else { continue };
            if !root.is_initialized() {
                return (name, false);
            }
            match std::fs::read_to_string(project_file(&root)) {
                Ok(recorded) if recorded.trim_end_matches('\n') == path => return (name, true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (name, true),
                _ => {}
            }
        }
        let exists = self.space(&suffixed).is_ok_and(|r| r.is_initialized());
        (suffixed, exists)
    }

    /// Record that space `name` holds the memory of `project`.
    pub fn record_project(&self, name: &str, project: &Path) -> std::io::Result<()> {
        let root = self.space(name).map_err(std::io::Error::other)?;
        let file = project_file(&root);
        if std::fs::read_to_string(&file).is_ok() {
            return Ok(());
        }
        super::atomic::write_atomic(&file, format!("{}\n", project.to_string_lossy()).as_bytes(), None)
            .map_err(std::io::Error::other)
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
