//! When the mirror syncs by itself. The interval is a setting admins can
//! store over GraphQL (`updateDocsSettings`), so the schedule is read from
//! the settings in force at each check, not fixed at start-up: the
//! runner's periodic loop asks [`gate`] every [`TICK`], and a sync is
//! enqueued when [`due`] says so.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, TimeDelta, Utc};
use entity::{docs_sync_run, task};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::{settings::Settings, stored};
use crate::{auth::keys::ServerSecret, jobs::runner::Gate};

/// How often the schedule is looked at: the finest interval it keeps.
pub const TICK: Duration = Duration::from_secs(15);

/// Whether a scheduled sync is due: an interval set (0: off), a platform
/// configured, no sync queued or running, and the last one (scheduled or
/// asked for) started at least an interval ago.
pub fn due(
    interval_secs: u64,
    configured: bool,
    in_flight: bool,
    last_started: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    if interval_secs == 0 || !configured || in_flight {
        return false;
    }
    let interval = TimeDelta::seconds(i64::try_from(interval_secs).unwrap_or(i64::MAX / 1_000));
    last_started.is_none_or(|at| now - at >= interval)
}

/// The periodic job's gate: reads the settings in force (the
/// environment's with the stored ones over them), whether a sync is in
/// flight and when the last one started.
pub fn gate(db: DatabaseConnection, secret: Arc<ServerSecret>, base: Arc<Settings>) -> Gate {
    Arc::new(move || {
        let (db, secret, base) = (db.clone(), secret.clone(), base.clone());
        Box::pin(async move {
            let settings = stored::effective(&db, &secret, &base).await?;
            let configured = settings.notion_configured() || settings.feishu_configured();
            if settings.docs_sync_interval == 0 || !configured {
                return Ok(false);
            }
            let in_flight = task::Entity::find()
                .filter(task::Column::Kind.eq(super::task::KIND))
                .filter(task::Column::Status.is_in([task::Status::Queued, task::Status::Running]))
                .count(&db)
                .await?
                > 0;
            let last_started: Option<DateTime<Utc>> = docs_sync_run::Entity::find()
                .select_only()
                .column(docs_sync_run::Column::StartedAt)
                .order_by_desc(docs_sync_run::Column::StartedAt)
                .into_tuple()
                .one(&db)
                .await?;
            Ok(due(
                settings.docs_sync_interval,
                configured,
                in_flight,
                last_started,
                Utc::now(),
            ))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_is_due_an_interval_after_the_last_one_started() {
        let now: DateTime<Utc> = "2026-12-04T12:00:00Z".parse().unwrap();
        let ago = |secs| Some(now - TimeDelta::seconds(secs));
        assert!(due(3600, true, false, None, now), "never synced");
        assert!(due(3600, true, false, ago(3600), now));
        assert!(!due(3600, true, false, ago(3599), now));
        assert!(
            due(60, true, false, ago(61), now),
            "a shorter interval stored"
        );
        assert!(!due(0, true, false, None, now), "0 turns it off");
        assert!(!due(60, false, false, None, now), "nothing configured");
        assert!(
            !due(60, true, true, ago(600), now),
            "one is queued or running"
        );
        assert!(
            due(u64::MAX, true, false, None, now),
            "a huge interval does not overflow"
        );
        assert!(!due(u64::MAX, true, false, ago(10), now));
    }
}
