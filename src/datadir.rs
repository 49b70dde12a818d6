//! The data directory (`TRELLIS_DATA_DIR`) holds the embedded database and
//! the instance's key file: password hashes and signing keys. It is
//! created `0700` and every file Trellis creates in it `0600`; SQLite gives
//! its WAL and shared-memory files the database file's mode. Start-up warns
//! about any of them that other local users may read (it does not change
//! modes an operator chose).

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The file a running server holds a shared lock on, so `trellis restore`
/// can tell that one is running on the directory.
pub const LOCK_FILE: &str = "trellis.lock";

/// Who holds the data directory: servers share it, a restore needs it
/// alone. Advisory (`flock`), released when the process ends however it
/// ends, so a crash never leaves it held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// A server: any number at once. Creates the lock file.
    Shared,
    /// A restore: nothing else may run on the directory. Never creates
    /// the lock file: where none exists no server has run.
    Exclusive,
}

/// What taking a [`Hold`] found.
#[derive(Debug)]
pub enum Lock {
    /// Held for as long as the file lives.
    Held(std::fs::File),
    /// No lock file: no server ever ran here (only for [`Hold::Exclusive`]).
    Absent,
    /// Someone holds it in a way that excludes this hold (a restore is
    /// running, or a server is).
    Busy,
}

/// Takes `hold` on `data_dir` without waiting.
pub fn hold(data_dir: &Path, hold: Hold) -> anyhow::Result<Lock> {
    let path = data_dir.join(LOCK_FILE);
    if hold == Hold::Shared {
        create_dir(data_dir)?;
        create_private_file(&path)?;
    }
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && hold == Hold::Exclusive => {
            return Ok(Lock::Absent);
        }
        Err(error) => {
            return Err(error).with_context(|| format!("opening the lock file {}", path.display()));
        }
    };
    let taken = match hold {
        Hold::Shared => file.try_lock_shared(),
        Hold::Exclusive => file.try_lock(),
    };
    match taken {
        Ok(()) => Ok(Lock::Held(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(Lock::Busy),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Whether a Unix mode lets anyone but the owner in.
pub fn too_open(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// Creates the directory (and missing parents), private to this user.
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("creating data directory {}", dir.display()))
}

/// Creates `path` empty and `0600` unless it exists; an existing file is
/// left as it is. Returns whether it was created.
pub fn create_private_file(path: &Path) -> anyhow::Result<bool> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error).with_context(|| format!("creating {}", path.display())),
    }
}

/// The paths among `paths` that exist and are more open than `0700`/`0600`,
/// with their modes.
pub fn open_to_others(paths: &[PathBuf]) -> Vec<(PathBuf, u32)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        paths
            .iter()
            .filter_map(|path| {
                let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
                too_open(mode).then(|| (path.clone(), mode))
            })
            .collect()
    }
    #[cfg(not(unix))]
    {
        let _ = paths;
        Vec::new()
    }
}

/// Logs a warning for each of `paths` that other local users may read.
pub fn warn_if_open(paths: &[PathBuf]) {
    for (path, mode) in open_to_others(paths) {
        let fix = if path.is_dir() {
            "chmod 700"
        } else {
            "chmod 600"
        };
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:o}"),
            "{} is readable by other local users (it holds password hashes or keys); {fix} it",
            path.display()
        );
    }
}

/// Writes `bytes` to `path` atomically: a temporary file (created with
/// `mode`, less the umask) in the same folder, fsync, rename over the
/// target, fsync of the folder. A reader, or a crash, sees the old file or
/// the new one, never half of one. The folder is created if missing.
pub fn atomic_write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "a file path has a folder")
    })?;
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("file");
    // A dot name: never taken for a document or a state file by a reader
    // listing the folder.
    let temp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    sync_dir(dir)
}

/// Flushes a folder's entries (a rename is durable only once its folder is).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owner_only_modes_are_private() {
        for mode in [0o700, 0o600, 0o400, 0o000] {
            assert!(!too_open(mode), "{mode:o}");
        }
        for mode in [0o755, 0o644, 0o640, 0o604, 0o701] {
            assert!(too_open(mode), "{mode:o}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn created_directories_and_files_are_private_and_existing_files_untouched() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        create_dir(&dir).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("trellis.db");
        assert!(create_private_file(&file).unwrap());
        assert_eq!(mode(&file), 0o600);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(!create_private_file(&file).unwrap());
        assert_eq!(
            open_to_others(&[dir.clone(), file.clone()]),
            vec![(file, 0o644)]
        );
    }
}
