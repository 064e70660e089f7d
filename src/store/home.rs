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
