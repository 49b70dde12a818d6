//! `trellis docs …`: the mirror from a terminal, without the server.
//!
//! Exit codes (seed 002's contract): 0 success; 1 a runtime failure (a
//! platform's run failed, a failing doctor check); 2 usage (clap's own);
//! 3 not configured — no platform has credentials (`doctor` prints its
//! whole report first). `resolve` uses a narrower set: 0 found, 1 not
//! found, 2 usage.

use std::{
    io::Write as _,
    process::ExitCode,
    sync::{Arc, Mutex},
};

use clap::{Subcommand, ValueEnum};

use super::adapter::Platform;
use super::engine::Phase;
use super::service::DocsService;
use super::settings::Settings;
use super::sync::{Observer, SyncProgress, SyncRequest, Syncer};
use crate::{auth::keys::ServerSecret, config::Config, db};

/// Not configured: no platform has credentials.
const NOT_CONFIGURED: u8 = 3;
const HOW_TO_CONFIGURE: &str = "no docs platform is configured: set TRELLIS_NOTION_TOKEN, or TRELLIS_FEISHU_APP_ID and TRELLIS_FEISHU_APP_SECRET (docs/docs-mirror.md)";

#[derive(Subcommand, Debug)]
pub enum DocsCommand {
    /// Sync the mirror now, in the foreground: progress on stderr, a
    /// one-line summary on stdout.
    Sync {
        /// A full run: delete and move detection.
        #[arg(long)]
        full: bool,
        /// Only this platform.
        #[arg(long, value_enum)]
        platform: Option<PlatformArg>,
    },
    /// Each platform's last run and document count.
    Status,
    /// Check the mirror and each platform (codes G0–G2, N1–N3, F1–F5).
    Doctor {
        /// The report as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Print the local path of a document given by id, URL or path.
    Resolve {
        /// A primary id, an alias, an online URL or a path in the mirror.
        target: String,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum PlatformArg {
    Notion,
    Feishu,
}

impl From<PlatformArg> for Platform {
    fn from(arg: PlatformArg) -> Self {
        match arg {
            PlatformArg::Notion => Platform::Notion,
            PlatformArg::Feishu => Platform::Feishu,
        }
    }
}

/// Runs one `trellis docs` command.
pub async fn run(
    command: DocsCommand,
    config: &Config,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    let db = db::connect(config).await?;
    let service = DocsService::new(
        Arc::new(settings.clone()),
        Syncer::new(db.clone(), &config.data_dir),
        None,
        Arc::new(ServerSecret::load(config)?),
    );
    let code = match command {
        DocsCommand::Sync { full, platform } => {
            sync(
                &service,
                SyncRequest {
                    platform: platform.map(Platform::from),
                    full,
                },
            )
            .await?
        }
        DocsCommand::Status => status(&service).await?,
        DocsCommand::Doctor { json } => doctor(&service, json).await?,
        DocsCommand::Resolve { target } => match service.resolve(&target).await {
            Ok(Some(row)) => {
                println!(
                    "{}",
                    service
                        .syncer()
                        .mirror_root()
                        .join(&row.local_path)
                        .display()
                );
                ExitCode::SUCCESS
            }
            Ok(None) => {
                eprintln!("{target}: not in the mirror");
                ExitCode::FAILURE
            }
            Err(error) => {
                eprintln!("{target}: {error}");
                ExitCode::FAILURE
            }
        },
    };
    db.close().await?;
    Ok(code)
}

async fn sync(service: &DocsService, request: SyncRequest) -> anyhow::Result<ExitCode> {
    let observer = Stderr::default();
    let settings = service.effective().await.map_err(|e| e.into_anyhow())?;
    let summary = service.syncer().run(&settings, request, &observer).await?;
    println!("{}", summary.line());
    Ok(if summary.nothing_configured() {
        eprintln!("{HOW_TO_CONFIGURE}");
        ExitCode::from(NOT_CONFIGURED)
    } else if summary.any_failed() || summary.only_busy() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn status(service: &DocsService) -> anyhow::Result<ExitCode> {
    let settings = &service.effective().await.map_err(|e| e.into_anyhow())?;
    if !settings.notion_configured() && !settings.feishu_configured() {
        eprintln!("{HOW_TO_CONFIGURE}");
        return Ok(ExitCode::from(NOT_CONFIGURED));
    }
    let runs = service.latest_runs().await.map_err(|e| e.into_anyhow())?;
    let counts = service
        .document_counts()
        .await
        .map_err(|e| e.into_anyhow())?;
    for (platform, count) in counts {
        let configured = match platform {
            Platform::Notion => settings.notion_configured(),
            Platform::Feishu => settings.feishu_configured(),
        };
        let last = runs
            .iter()
            .find(|run| run.platform == platform.as_str())
            .map(|run| {
                format!(
                    "last run #{} {} {} at {}{}",
                    run.id,
                    run.mode,
                    run.status,
                    run.finished_at.unwrap_or(run.started_at).to_rfc3339(),
                    run.error
                        .as_deref()
                        .map(|error| format!(" ({error})"))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "never synced".to_owned());
        println!(
            "{}: {}, {count} documents, {last}",
            platform.as_str(),
            if configured {
                "configured"
            } else {
                "not configured"
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn doctor(service: &DocsService, json: bool) -> anyhow::Result<ExitCode> {
    let report = service.doctor().await.map_err(|e| e.into_anyhow())?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    Ok(if !report.configured {
        eprintln!("{HOW_TO_CONFIGURE}");
        ExitCode::from(NOT_CONFIGURED)
    } else if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Progress lines on stderr: each phase change, and the documents phase
/// every 100 documents.
#[derive(Default)]
struct Stderr {
    last: Mutex<Vec<SyncProgress>>,
}

impl Observer for Stderr {
    fn progress(&self, progress: SyncProgress) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let previous = last
            .iter()
            .position(|seen| seen.platform == progress.platform);
        let worth = match previous.map(|index| last[index]) {
            None => true,
            Some(seen) => {
                seen.phase != progress.phase
                    || (progress.phase == Phase::Documents
                        && (progress.done / 100 != seen.done / 100
                            || progress.done == progress.total))
            }
        };
        match previous {
            Some(index) => last[index] = progress,
            None => last.push(progress),
        }
        if worth {
            let _ = writeln!(
                std::io::stderr(),
                "{}: {:?} {}/{} documents, {} requests, {} waits, {} errors{}",
                progress.platform.as_str(),
                progress.phase,
                progress.done,
                progress.total,
                progress.requests,
                progress.waits,
                progress.errors,
                if progress.failed { " (failed)" } else { "" },
            );
        }
    }
}
