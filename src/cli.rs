//! The `trellis` command line: `serve` (the default), `migrate`,
//! `backup`, `restore`, `user add`, `schema`, and each domain's own commands
//! (`docs …`). Exit codes: `ops::EXIT_CODES`.

use std::{io::BufRead, path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use secrecy::SecretString;

use crate::{app, auth::service::AuthService, config::Config, db, error::AppError, ops, telemetry};

#[derive(Parser, Debug)]
#[command(
    name = "trellis",
    version,
    about = "Feeds, resources, docs and reading progress behind one GraphQL API",
    after_help = crate::ops::EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub config: Config,
    #[command(flatten)]
    pub domains: app::DomainSettings,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server (the default when no command is given).
    Serve {
        /// Which parts to run: all, api (no workers) or worker (no GraphQL).
        #[arg(long, env = "TRELLIS_ROLE", value_enum, default_value_t = app::Role::All)]
        role: app::Role,
    },
    /// Apply pending database migrations and exit. An existing SQLite
    /// database is first copied to `<data dir>/backups/pre-migrate-<UTC>.db`
    /// (the newest 5 are kept).
    #[command(after_help = crate::ops::EXIT_CODES)]
    Migrate {
        /// List the pending migrations, one per line, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write the SQLite database (a consistent copy, while the server runs)
    /// and the data directory's secrets and state files (`instance.key`,
    /// top-level `*.json`; not the docs `mirror/`) into one tar file.
    /// PostgreSQL: use pg_dump.
    #[command(after_help = crate::ops::EXIT_CODES)]
    Backup {
        /// The archive to write (replaced atomically if it exists).
        file: PathBuf,
    },
    /// Put a `trellis backup` archive back: checks all of it first, then
    /// writes the state files and the database (last). Stop the server first.
    #[command(after_help = crate::ops::EXIT_CODES)]
    Restore {
        /// The archive `trellis backup` wrote.
        file: PathBuf,
        /// Replace an existing database and state files.
        #[arg(long)]
        force: bool,
    },
    /// Manage accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// The docs mirror: sync, status, doctor, resolve.
    #[command(subcommand)]
    Docs(crate::docs::cli::DocsCommand),
    /// Print the GraphQL SDL (what `schema.graphql` must contain).
    Schema {
        /// Compare with this file instead of printing; exit 1 when they differ.
        #[arg(long, value_name = "FILE")]
        check: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Create an account. The password is read from the first line of stdin.
    Add {
        username: String,
        #[arg(long, value_enum, default_value_t = RoleArg::Member)]
        role: RoleArg,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum RoleArg {
    Admin,
    Member,
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let (config, domains) = (cli.config, cli.domains);
    match cli.command.unwrap_or(Command::Serve {
        role: app::Role::All,
    }) {
        Command::Schema { check } => return schema(check),
        Command::Docs(command) => {
            config.validate()?;
            telemetry::init_logging(&config)?;
            return crate::docs::cli::run(command, &config, &domains.docs).await;
        }
        Command::Serve { role } => {
            config.validate()?;
            domains.validate()?;
            telemetry::init_logging(&config)?;
            // Held while serving: `trellis restore` refuses to replace the
            // database under a running server.
            let _running =
                match crate::datadir::hold(&config.data_dir, crate::datadir::Hold::Shared)? {
                    crate::datadir::Lock::Busy => anyhow::bail!(
                        "a restore is running on {}; start the server when it is done",
                        config.data_dir.display()
                    ),
                    lock => lock,
                };
            app::serve(config, domains, role).await?;
        }
        Command::Migrate { dry_run: true } => {
            config.validate()?;
            telemetry::init_logging(&config)?;
            for name in ops::upgrade::dry_run(&config).await?.pending {
                println!("{name}");
            }
        }
        Command::Migrate { dry_run: false } => {
            config.validate()?;
            telemetry::init_logging(&config)?;
            let db = db::connect(&config).await?;
            db.close().await?;
            tracing::info!("migrations applied");
        }
        Command::Backup { file } => {
            config.validate()?;
            telemetry::init_logging(&config)?;
            let summary = ops::archive::backup(&config, &file).await?;
            println!("backed up {summary} to {}", file.display());
        }
        Command::Restore { file, force } => {
            config.validate()?;
            telemetry::init_logging(&config)?;
            let summary = ops::archive::restore(&config, &file, force).await?;
            println!("restored {summary} from {}", file.display());
        }
        Command::User(UserCommand::Add { username, role }) => {
            config.validate()?;
            telemetry::init_logging(&config)?;
            let db = db::connect(&config).await?;
            let auth = AuthService::new(db.clone(), &config).await?;
            let password = read_password()?;
            let role = match role {
                RoleArg::Admin => crate::auth::Role::Admin,
                RoleArg::Member => crate::auth::Role::Member,
            };
            let user = auth
                .create_user(&username, password, role)
                .await
                .map_err(AppError::into_anyhow)
                .with_context(|| format!("creating user `{username}`"))?;
            println!("created {} ({:?}) {}", user.username, user.role, user.id);
            db.close().await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn read_password() -> anyhow::Result<SecretString> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    anyhow::ensure!(
        !password.is_empty(),
        "no password on stdin (pipe it in: `printf '%s\\n' \"$PASSWORD\" | trellis user add NAME`)"
    );
    Ok(SecretString::from(password))
}

fn schema(check: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let sdl = crate::schema::sdl();
    let Some(path) = check else {
        print!("{sdl}");
        return Ok(ExitCode::SUCCESS);
    };
    let committed =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    if committed == sdl {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "{} is out of date; regenerate it with `trellis schema > {}`",
            path.display(),
            path.display()
        );
        Ok(ExitCode::FAILURE)
    }
}
