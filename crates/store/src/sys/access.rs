//! Who may read and write a memory root: private modes for what memfold creates, the report of
//! what others can read, and the checks a process running as root makes.
//!
//! - **Private by default.** Every folder memfold creates is 0700 and every file 0600
//!   ([`create_dir`], [`open_append`], and `atomic::write_atomic` for a new file); the
//!   `memfold` binary also sets its umask to 077 ([`private_umask`]), so what LanceDB writes
//!   under `.memfold/index` is private too. A file that exists keeps its mode: a person who made
//!   `MEMORY.md` group-readable for an agent keeps that.
//! - **Exposed files** ([`exposed`]): files and folders of the root that other accounts can
//!   read or write (any permission bit for "others"), which `verify` and `serve` report with
//!   the fix.
//! - **As root** ([`foreign_owner`]): a root process refuses a memory root owned, in whole or
//!   in part, by another account (like git's `safe.directory`) unless
//!   `security.allow_other_owner` is set; and ([`check_link`]) no write follows a symbolic
//!   link into a folder whose owner is not the owner of the folder holding the link, so a link
//!   planted in a folder others can write cannot aim a root process at `/etc`.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// Mode of the folders memfold creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files memfold creates.
pub const FILE_MODE: u32 = 0o600;

/// Make the process's new files private (umask 077). Called once at the start of `memfold`.
pub fn private_umask() {
    #[cfg(unix)]
    // SAFETY: umask only sets the process's file mode creation mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Create `dir` and its missing parents, each new one 0700.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(dir)
}

/// Open `path` for appending (and reading), creating it 0600; a symbolic link is followed only
/// where [`check_link`] allows.
pub fn open_append(path: &Path) -> io::Result<File> {
    check_link(path)?;
    let mut options = OpenOptions::new();
    options.create(true).read(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
    options.open(path)
}

/// Refuse to follow `path` if it is a symbolic link whose target lies in a folder owned by
/// another account than the folder holding the link. Not a link, or missing: fine.
pub fn check_link(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
        if !meta.file_type().is_symlink() {
            return Ok(());
        }
        let holder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let owner = std::fs::metadata(holder)?.uid();
        let target = link_target(path)?;
        let folder = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let folder_owner = std::fs::metadata(folder)?.uid();
        if folder_owner != owner {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a symbolic link into {}, a folder owned by {} rather than by {}, who owns the folder \
                     holding the link; memfold does not write through it",
                    path.display(),
                    folder.display(),
                    user_name(folder_owner),
                    user_name(owner)
                ),
            ));
        }
    }
    Ok(())
}

/// A file or folder of the root that others can read or write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    /// Relative to the root ("" for the root itself).
    pub path: String,
    pub mode: u32,
}

/// The files and folders of `root` (the root itself, its memory files, the archive, memfold's
/// state; not the index's own files, which sit in the private `.memfold`) that accounts other
/// than the owner and its group can read or write.
pub fn exposed(root: &Path) -> Vec<Exposed> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut found = Vec::new();
        let mut check = |path: &Path| {
            if let Ok(meta) = std::fs::symlink_metadata(path)
                && !meta.file_type().is_symlink()
            {
                let mode = meta.permissions().mode() & 0o7777;
                if mode & 0o007 != 0 {
                    let rel = path.strip_prefix(root).unwrap_or(path).display().to_string();
                    found.push(Exposed { path: rel, mode });
                }
            }
        };
        check(root);
        for dir in ["archive", "consolidated", ".memfold"] {
            let dir = root.join(dir);
            check(&dir);
            let Ok(list) = std::fs::read_dir(&dir) else { continue };
            let mut paths: Vec<PathBuf> = list.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for path in paths.iter().filter(|p| !p.ends_with("index")) {
                check(path);
            }
        }
        check(&root.join("MEMORY.md"));
        check(&root.join("memfold.toml"));
        found
    }
    #[cfg(not(unix))]
    {
        let _ = root;
        Vec::new()
    }
}

/// What a person runs to make the root private again.
pub fn fix_for(root: &Path) -> String {
    format!("chmod -R go-rwx {}", shell_quoted(root))
}

fn shell_quoted(path: &Path) -> String {
    let text = path.display().to_string();
    if text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-~".contains(c)) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// This process's user id (0 where there is none).
pub fn user_id() -> u32 {
    #[cfg(unix)]
    // SAFETY: getuid has no preconditions and cannot fail.
    return unsafe { libc::getuid() };
    #[cfg(not(unix))]
    0
}

/// A file's permission bits (None: not there, or no such bits on this system).
pub fn mode(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).ok().map(|m| m.permissions().mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Create `path` with `bytes`, readable by its owner alone (0600); an existing file is an error.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

/// Whether this process runs as root.
pub fn running_as_root() -> bool {
    #[cfg(unix)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    return unsafe { libc::geteuid() } == 0;
    #[cfg(not(unix))]
    false
}

/// For a process running as root: the first entry of `root` (the root itself, then what is in
/// it, without following links and without descending into the index) owned by an account
/// other than root, and that account's uid. None when the process is not root.
pub fn foreign_owner(root: &Path) -> io::Result<Option<(PathBuf, u32)>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if !running_as_root() {
            return Ok(None);
        }
        let mut stack = vec![root.to_path_buf()];
        while let Some(path) = stack.pop() {
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if meta.uid() != 0 {
                return Ok(Some((path, meta.uid())));
            }
            if meta.is_dir() && !path.ends_with(".memfold/index") {
                for entry in std::fs::read_dir(&path)? {
                    stack.push(entry?.path());
                }
            }
        }
        Ok(None)
    }
    #[cfg(not(unix))]
    {
        let _ = root;
        Ok(None)
    }
}

/// The name of the account with this uid (from `/etc/passwd`), or `uid N`.
pub fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let id = fields.nth(1)?.parse::<u32>().ok()?;
            (id == uid).then(|| format!("{name} (uid {uid})"))
        })
        .unwrap_or_else(|| format!("uid {uid}"))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn what_memfold_creates_is_private_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_dir(&nested).unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let file = nested.join("log.jsonl");
        open_append(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        // An existing file keeps its mode.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        open_append(&file).unwrap();
        assert_eq!(mode(&file), 0o640);
    }

    #[test]
    fn exposed_names_what_others_can_read_and_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        create_dir(&root.join("consolidated")).unwrap();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(root.join("consolidated/memory.md"), "x").unwrap();
        std::fs::set_permissions(root.join("consolidated/memory.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(root.join("MEMORY.md"), "x").unwrap();
        std::fs::set_permissions(root.join("MEMORY.md"), std::fs::Permissions::from_mode(0o640)).unwrap();
        let found = exposed(root);
        assert_eq!(
            found,
            vec![Exposed { path: "consolidated/memory.md".into(), mode: 0o644 }],
            "group access is a choice"
        );
        assert_eq!(fix_for(Path::new("/home/a b/m")), "chmod -R go-rwx '/home/a b/m'");
    }

    #[test]
    fn a_link_is_followed_only_into_a_folder_of_the_same_owner() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        create_dir(&elsewhere).unwrap();
        let link = dir.path().join("MEMORY.md");
        std::os::unix::fs::symlink(elsewhere.join("MEMORY.md"), &link).unwrap();
        check_link(&link).unwrap();
        check_link(&dir.path().join("missing.md")).unwrap();
        if running_as_root() {
            // A folder of another account (uid 65534, nobody) is refused.
            std::os::unix::fs::chown(&elsewhere, Some(65534), None).unwrap();
            let err = check_link(&link).unwrap_err();
            assert!(err.to_string().contains("does not write through it"), "{err}");
            assert!(open_append(&link).is_err());
        }
    }
}

/// The file a path names once symbolic links are followed (the path itself when it is none,
/// or does not exist). A link may dangle: its target is where the file will be.
pub fn link_target(path: &Path) -> std::io::Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&at)?;
                at = match at.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}
