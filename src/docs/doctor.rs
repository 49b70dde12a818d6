//! `trellis docs doctor` and `docsDoctor`: checks with stable codes, so a
//! script (or a person reading a bug report) knows what failed.
//!
//! - `G0` the mirror folder is writable; `G1` the database answers; `G2`
//!   every document the manifest lists is on disk.
//! - `N1` a Notion token is set; `N2`, `N3` from the Notion adapter
//!   (token accepted, content readable).
//! - `F1` Feishu credentials are set; `F2`–`F5` from the Feishu adapter
//!   (token obtained, wiki scope, drive scope, envelope shape).
//!
//! A platform without credentials is not a failure: its checks are
//! reported skipped. `docs/docs-mirror.md` lists every code.

use std::path::Path;

use sea_orm::DatabaseConnection;
use serde::{Deserialize, Serialize};

use super::adapter::{Platform, Probe};
use super::engine::manifest;
use super::platforms::{self, Configured};
use super::settings::Settings;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub code: String,
    /// `ok`, `failed` or `skipped`.
    pub status: CheckStatus,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, async_graphql::Enum)]
#[serde(rename_all = "snake_case")]
#[graphql(name = "DocsCheckStatus")]
pub enum CheckStatus {
    Ok,
    Failed,
    Skipped,
}

/// Every check, in code order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Some platform has credentials.
    pub configured: bool,
    pub checks: Vec<Check>,
}

impl Report {
    /// No check failed.
    pub fn ok(&self) -> bool {
        self.checks
            .iter()
            .all(|check| check.status != CheckStatus::Failed)
    }

    /// The report as lines for a terminal.
    pub fn text(&self) -> String {
        self.checks
            .iter()
            .map(|check| {
                let status = match check.status {
                    CheckStatus::Ok => "ok  ",
                    CheckStatus::Failed => "FAIL",
                    CheckStatus::Skipped => "skip",
                };
                format!("{} {status} {}\n", check.code, check.message)
            })
            .collect()
    }
}

fn check(code: &str, status: CheckStatus, message: impl Into<String>) -> Check {
    Check {
        code: code.to_owned(),
        status,
        message: message.into(),
    }
}

impl From<Probe> for Check {
    fn from(probe: Probe) -> Self {
        let status = if probe.ok {
            CheckStatus::Ok
        } else {
            CheckStatus::Failed
        };
        check(&probe.code, status, probe.message)
    }
}

/// Runs every check.
pub async fn run(db: &DatabaseConnection, settings: &Settings, mirror_root: &Path) -> Report {
    let mut checks = vec![writable(mirror_root)];
    let database = db.ping().await;
    checks.push(match &database {
        Ok(()) => check("G1", CheckStatus::Ok, "the database answers"),
        Err(error) => check("G1", CheckStatus::Failed, format!("the database: {error}")),
    });
    checks.push(if database.is_ok() {
        consistent(db, mirror_root).await
    } else {
        check("G2", CheckStatus::Skipped, "the database is unreachable")
    });
    let mut configured = false;
    for (platform, present, codes) in [
        (
            Platform::Notion,
            ("N1", "TRELLIS_NOTION_TOKEN"),
            &["N2", "N3"][..],
        ),
        (
            Platform::Feishu,
            ("F1", "TRELLIS_FEISHU_APP_ID and TRELLIS_FEISHU_APP_SECRET"),
            &["F2", "F3", "F4", "F5"][..],
        ),
    ] {
        let adapter = match platforms::adapter(settings, platform) {
            Ok(adapter) => adapter,
            Err(error) => {
                checks.push(check(present.0, CheckStatus::Failed, error.to_string()));
                continue;
            }
        };
        let has_credentials = match platform {
            Platform::Notion => settings.notion_configured(),
            Platform::Feishu => settings.feishu_configured(),
        };
        configured |= has_credentials;
        if !has_credentials {
            checks.push(check(
                present.0,
                CheckStatus::Skipped,
                format!("{} not set: {} is skipped", present.1, platform.as_str()),
            ));
            skip(&mut checks, codes, "no credentials");
            continue;
        }
        checks.push(check(
            present.0,
            CheckStatus::Ok,
            format!("{} set", present.1),
        ));
        match adapter {
            Configured::Ready(adapter) => {
                let probes = adapter.probes().await;
                let ran: Vec<String> = probes.iter().map(|probe| probe.code.clone()).collect();
                checks.extend(probes.into_iter().map(Check::from));
                let rest: Vec<&str> = codes
                    .iter()
                    .copied()
                    .filter(|code| !ran.iter().any(|ran| ran == code))
                    .collect();
                skip(&mut checks, &rest, "an earlier check failed");
            }
            Configured::Skipped(why) => skip(&mut checks, codes, why),
        }
    }
    Report { configured, checks }
}

fn skip(checks: &mut Vec<Check>, codes: &[&str], why: &str) {
    checks.extend(
        codes
            .iter()
            .map(|code| check(code, CheckStatus::Skipped, why)),
    );
}

/// `G0`: a file can be created (and removed) in the mirror's own folder.
fn writable(mirror_root: &Path) -> Check {
    let internal = mirror_root.join(".internal");
    let probe = internal.join(format!(".doctor-{}", std::process::id()));
    let outcome = std::fs::create_dir_all(&internal)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe));
    match outcome {
        Ok(()) => check(
            "G0",
            CheckStatus::Ok,
            format!("{} is writable", mirror_root.display()),
        ),
        Err(error) => check(
            "G0",
            CheckStatus::Failed,
            format!("{} is not writable: {error}", mirror_root.display()),
        ),
    }
}

/// `G2`: every live document of the manifest has its file (or folder).
async fn consistent(db: &DatabaseConnection, mirror_root: &Path) -> Check {
    let rows = match manifest::live_documents(db).await {
        Ok(rows) => rows,
        Err(error) => return check("G2", CheckStatus::Failed, error.to_string()),
    };
    let missing: Vec<&str> = rows
        .iter()
        .map(|row| row.local_path.as_str())
        .filter(|path| !mirror_root.join(path).exists())
        .collect();
    match missing.first() {
        None => check(
            "G2",
            CheckStatus::Ok,
            format!("the {} documents of the manifest are on disk", rows.len()),
        ),
        Some(first) => check(
            "G2",
            CheckStatus::Failed,
            format!(
                "{} of {} documents of the manifest are missing on disk (first: {first}); run a full sync",
                missing.len(),
                rows.len()
            ),
        ),
    }
}
