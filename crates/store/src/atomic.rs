//! Whole-file writes that either happen completely or not at all, refused when the file changed since it was read.
//!
//! A write goes to a temp file in the same folder, is fsynced, renamed over the target, and
//! the folder is fsynced. With an expected hash, the current content is hashed first (and
//! again just before the rename) and the write is refused if it differs: the daemon never
//! overwrites a change it has not read.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::content_hash;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error("{path} changed since it was read; not overwriting it")]
    Stale { path: PathBuf },
    #[error("writing {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// The hash of a file's current content; a missing file hashes as empty.
pub fn current_hash(path: &Path) -> std::io::Result<String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(content_hash(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(content_hash(b"")),
        Err(e) => Err(e),
    }
}

/// Replace `path` with `content`. With `expected`, refuse unless the file still hashes to it.
///
/// A symbolic link is followed: the file it points to is replaced and the link stays, so a
/// `MEMORY.md` linked into an agent's prompt folder (or a `memory.md` kept in a notes vault)
/// keeps receiving what memfold writes; but only into a folder of the same owner
/// ([`crate::sys::access::check_link`]).
pub fn write_atomic(path: &Path, content: &[u8], expected: Option<&str>) -> Result<(), WriteError> {
    let io = |source| WriteError::Io { path: path.to_path_buf(), source };
    crate::sys::access::check_link(path).map_err(io)?;
    let target = crate::sys::access::link_target(path).map_err(io)?;
    let path = target.as_path();
    let check = || -> Result<(), WriteError> {
        if let Some(expected) = expected
            && current_hash(path).map_err(io)? != expected
        {
            return Err(WriteError::Stale { path: path.to_path_buf() });
        }
        Ok(())
    };
    check()?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // The file keeps its mode (a MEMORY.md another account reads stays readable to it) and, as
    // far as this process may, its owner (a service running as root must not take a person's
    // memory.md from them); a new one is private (0600, as the temp file is made).
    let existing = std::fs::metadata(path).ok();
    let mut builder = tempfile::Builder::new();
    builder.prefix(".memfold-").suffix(".tmp");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(crate::sys::access::FILE_MODE));
    let mut tmp = builder.tempfile_in(dir).map_err(io)?;
    tmp.write_all(content).map_err(io)?;
    if let Some(meta) = existing {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // Only root may give a file away; anyone else keeps the file as theirs.
            let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid()));
        }
        tmp.as_file().set_permissions(meta.permissions()).map_err(io)?;
    }
    tmp.as_file().sync_all().map_err(io)?;
    // Narrow the window between the check and the rename as far as a rename allows.
    check()?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    sync_dir(dir).map_err(io)?;
    Ok(())
}

/// fsync a folder so a rename inside it is durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Append `content` to `path` and fsync it, starting on a fresh line if the file ends mid-line.
pub fn append_durable(path: &Path, content: &[u8]) -> std::io::Result<()> {
    append_lines(path, content)?.sync_data()
}

/// Append `content` to `path`, starting on a fresh line if the file ends mid-line, without
/// waiting for the disk: for logs where a power cut may cost the last lines but nothing else
/// (a torn last line is skipped by the reader, and the next append starts a fresh one).
pub fn append_lines(path: &Path, content: &[u8]) -> std::io::Result<std::fs::File> {
    let mut file = crate::sys::access::open_append(path)?;
    let len = file.metadata()?.len();
    let mut buf = Vec::with_capacity(content.len() + 1);
    if len > 0 && !ends_with_newline(&mut file, len)? {
        buf.push(b'\n');
    }
    buf.extend_from_slice(content);
    file.write_all(&buf)?;
    Ok(file)
}

pub(crate) fn ends_with_newline(file: &mut std::fs::File, len: u64) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if len == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.md");
        std::fs::write(&path, "old\n").unwrap();
        let hash = current_hash(&path).unwrap();
        write_atomic(&path, b"new\n", Some(&hash)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["memory.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_keeps_its_mode_and_a_new_one_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let shared = dir.path().join("MEMORY.md");
        std::fs::write(&shared, "old").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&shared, b"new", None).unwrap();
        assert_eq!(mode(&shared), 0o640);
        let new = dir.path().join("memory.md");
        write_atomic(&new, b"made", None).unwrap();
        assert_eq!(mode(&new), 0o600, "whatever the umask");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_keeps_its_owner_where_this_process_may_keep_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.md");
        std::fs::write(&path, "old").unwrap();
        if std::os::unix::fs::chown(&path, Some(4242), Some(4243)).is_err() {
            eprintln!("not checked: only root can give a file to another owner");
            return;
        }
        write_atomic(&path, b"new", None).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4243));
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("agent");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("MEMORY.md"), "old").unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let link = root.join("MEMORY.md");
        std::os::unix::fs::symlink("../agent/MEMORY.md", &link).unwrap();
        write_atomic(&link, b"new", Some(&content_hash(b"old"))).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays");
        assert_eq!(std::fs::read_to_string(elsewhere.join("MEMORY.md")).unwrap(), "new");
        // A dangling link gets its file; a chain of links is followed to its end.
        let chain = root.join("chain.md");
        std::os::unix::fs::symlink(&link, &chain).unwrap();
        write_atomic(&chain, b"newer", None).unwrap();
        assert_eq!(std::fs::read_to_string(elsewhere.join("MEMORY.md")).unwrap(), "newer");
        let dangling = root.join("memory.md");
        std::os::unix::fs::symlink(elsewhere.join("memory.md"), &dangling).unwrap();
        write_atomic(&dangling, b"made", None).unwrap();
        assert_eq!(std::fs::read_to_string(elsewhere.join("memory.md")).unwrap(), "made");
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        let looped = root.join("loop.md");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        assert!(write_atomic(&looped, b"x", None).unwrap_err().to_string().contains("too many levels"));
    }

    #[test]
    fn edited_between_read_and_write_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.md");
        std::fs::write(&path, "as read\n").unwrap();
        let hash = current_hash(&path).unwrap();
        std::fs::write(&path, "as read\nand a hand edit\n").unwrap();
        let err = write_atomic(&path, b"daemon's version\n", Some(&hash)).unwrap_err();
        assert!(matches!(err, WriteError::Stale { .. }), "{err}");
        assert!(err.to_string().contains("memory.md"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "as read\nand a hand edit\n");
    }

    #[test]
    fn missing_file_counts_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.md");
        write_atomic(&path, b"x", Some(&content_hash(b""))).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");
    }

    #[test]
    fn append_after_torn_line_starts_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"b\":").unwrap();
        append_durable(&path, b"{\"c\":3}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":\n{\"c\":3}\n");
    }
}
