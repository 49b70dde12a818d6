//! Running Trellis for real: `trellis backup` / `trellis restore` (the
//! embedded SQLite database and the data directory's secrets and state in
//! one file), and upgrade safety (a database newer than the binary is
//! refused; an existing SQLite database is copied aside before migrations
//! change it; `trellis migrate --dry-run`).
//!
//! The decisions (which migrations are pending or unknown, which backups to
//! prune, which files belong in a backup, whether an archive matches its
//! manifest) are pure, in [`plan`]; [`archive`], [`sqlite`] and [`upgrade`]
//! do the I/O. What an operator sees is in `docs/operations.md`, "Backups"
//! and "Upgrades".

use std::path::PathBuf;

pub mod archive;
pub mod plan;
pub mod sqlite;
pub mod upgrade;

/// The exit codes of the command line, as `--help` shows them.
pub const EXIT_CODES: &str = "\
Exit codes:
  0   done (for `migrate --dry-run`: pending migrations listed, nothing changed)
  1   any other failure (configuration, I/O, database); the message says which
  2   the command line is wrong
  3   `docs`: the docs mirror is not configured
  10  the database's schema is newer than this binary (it has migrations this version does not know)
  11  `backup`/`restore` on PostgreSQL: use pg_dump (docs/operations.md, \"Backups\")
  12  `restore`: the target database (or a file the backup holds) exists; stop the server, add --force
  13  `restore`: the file is not a sound Trellis backup (damaged, truncated, tampered); nothing was written
  14  `restore`: a server is running on the data directory (or a restore is); stop it first";

/// What the operations commands refuse to do, each with its own exit code
/// (see [`EXIT_CODES`]).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The database has applied migrations this binary does not know: a
    /// newer version migrated it, and this one would misread it.
    #[error(
        "the database's schema is newer than this binary: it has migrations this version does not know ({}). \
         Run the newer trellis, or restore the backup taken before the upgrade (docs/operations.md, \"Upgrades\")",
        .0.join(", ")
    )]
    SchemaNewer(Vec<String>),
    /// `backup`/`restore` work on the embedded SQLite database only.
    #[error(
        "trellis {0} works on the embedded SQLite database only; for PostgreSQL use pg_dump and pg_restore \
         (docs/operations.md, \"Backups\")"
    )]
    NotSqlite(&'static str),
    /// `restore` would overwrite these files.
    #[error(
        "restore refuses to overwrite {}; stop the server and run restore again with --force to replace them",
        .0.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    TargetExists(Vec<PathBuf>),
    /// The archive failed verification; nothing was written.
    #[error("{path} is not a sound Trellis backup: {reason}; nothing was restored")]
    BadArchive { path: PathBuf, reason: String },
    /// A server (or another restore) holds the data directory: replacing
    /// the database under it would lose what it writes next.
    #[error(
        "a Trellis server is running on {} (or another restore is); stop it, then restore",
        .0.display()
    )]
    InUse(PathBuf),
}

impl Refusal {
    pub fn exit_code(&self) -> u8 {
        match self {
            Refusal::SchemaNewer(_) => 10,
            Refusal::NotSqlite(_) => 11,
            Refusal::TargetExists(_) => 12,
            Refusal::BadArchive { .. } => 13,
            Refusal::InUse(_) => 14,
        }
    }
}

/// The process's exit code for an error: a [`Refusal`]'s anywhere in its
/// chain, else 1.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<Refusal>())
        .map_or(1, Refusal::exit_code)
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn a_refusal_keeps_its_exit_code_under_context() {
        let refused: anyhow::Result<()> =
            Err(Refusal::SchemaNewer(vec!["m2099".into()])).context("applying migrations");
        assert_eq!(exit_code(&refused.unwrap_err()), 10);
        assert_eq!(exit_code(&anyhow::anyhow!("disk full")), 1);
    }

    #[test]
    fn every_refusal_code_is_documented_once() {
        let refusals = [
            Refusal::SchemaNewer(vec![]),
            Refusal::NotSqlite("backup"),
            Refusal::TargetExists(vec![]),
            Refusal::BadArchive {
                path: PathBuf::new(),
                reason: String::new(),
            },
            Refusal::InUse(PathBuf::new()),
        ];
        for refusal in refusals {
            let line = format!("\n  {}  ", refusal.exit_code());
            assert_eq!(EXIT_CODES.matches(&line).count(), 1, "{line:?}");
        }
    }
}
