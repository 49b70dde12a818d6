//! The mirror's file operations. Every write is atomic (a temporary file
//! in the same folder, fsync, rename over the target, fsync of the folder):
//! a reader, or a crash, sees the old file or the new one, never half of
//! one. Blocking calls on small files, made inline: a sync runs as a
//! long job, never on a request's path.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically, creating its folder (mode 0666
/// less the umask, like any file the mirror's readers open).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::datadir::atomic_write(path, bytes, 0o666)
}

/// The file's bytes, `None` if there is no such file.
pub fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Writes `bytes` unless the file already holds exactly them; says whether
/// it wrote.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    if read_optional(path)?.as_deref() == Some(bytes) {
        return Ok(false);
    }
    atomic_write(path, bytes)?;
    Ok(true)
}

/// Moves a file or folder, creating the destination's folder; the
/// destination must not exist. Says whether anything was moved (`from`
/// may be gone already: an ancestor's move carried it).
pub fn move_path(from: &Path, to: &Path) -> io::Result<bool> {
    if from == to || fs::symlink_metadata(from).is_err() {
        return Ok(false);
    }
    if fs::symlink_metadata(to).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} is taken", to.display()),
        ));
    }
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::rename(from, to)?;
    if let Some(dir) = to.parent() {
        crate::datadir::sync_dir(dir)?;
    }
    Ok(true)
}

/// Removes `dir` and its ancestors up to (not including) `stop` while they
/// are empty.
pub fn remove_empty_dirs(dir: &Path, stop: &Path) {
    let mut current: Option<PathBuf> = Some(dir.to_path_buf());
    while let Some(dir) = current {
        if dir == stop || !dir.starts_with(stop) || fs::remove_dir(&dir).is_err() {
            return;
        }
        current = dir.parent().map(Path::to_path_buf);
    }
}

/// The names of the entries of a folder (none if it does not exist).
pub fn entry_names(dir: &Path) -> io::Result<Vec<String>> {
    match fs::read_dir(dir) {
        Ok(entries) => {
            let mut names = Vec::new();
            for entry in entries {
                if let Some(name) = entry?.file_name().to_str() {
                    names.push(name.to_owned());
                }
            }
            names.sort();
            Ok(names)
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_whole_files_and_leave_no_temp() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("a/b/x.md");
        atomic_write(&path, b"one").expect("written");
        assert!(!write_if_changed(&path, b"one").expect("compared"));
        assert!(write_if_changed(&path, b"two").expect("written"));
        assert_eq!(fs::read(&path).expect("read"), b"two");
        assert_eq!(
            entry_names(&dir.path().join("a/b")).expect("listed"),
            ["x.md"]
        );
    }

    #[test]
    fn moves_refuse_a_taken_destination_and_skip_a_gone_source() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let a = dir.path().join("a.md");
        let b = dir.path().join("sub/b.md");
        atomic_write(&a, b"a").expect("written");
        assert!(move_path(&a, &b).expect("moved"));
        assert!(!move_path(&a, &b).expect("nothing to move"));
        atomic_write(&a, b"again").expect("written");
        assert!(move_path(&a, &b).is_err());
        fs::remove_file(&b).expect("removed");
        remove_empty_dirs(&dir.path().join("sub"), dir.path());
        assert!(!dir.path().join("sub").exists());
        assert!(dir.path().exists());
    }
}
