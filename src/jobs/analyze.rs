//! `system.analyze`: PostgreSQL's planner statistics for tables autovacuum
//! does not look after. With autovacuum off (for the server, or for one
//! table), a table's statistics are never refreshed: the task and outbox
//! queries then keep plans made for an empty table (a 100k-node tree's
//! p50 read went from 53–66 ms to 102–124 ms). Every ten minutes this job
//! analyzes each such table that changed enough since its last `ANALYZE`,
//! by autovacuum's own default rule; `/readyz` says whether autovacuum is
//! on. On SQLite it does nothing (its planner is not fed by statistics
//! here: the hot queries name their join order).

use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde::{Serialize, de::IgnoredAny};
use serde_json::{Value, json};

use super::{
    handler::{SingleStage, StageError, StageRun},
    model::{NewTask, Queue},
};
use crate::error::AppResult;

pub const KIND: &str = "system.analyze";
pub const PERIOD: Duration = Duration::from_secs(600);

/// autovacuum's defaults: `autovacuum_analyze_threshold` and
/// `autovacuum_analyze_scale_factor`.
const THRESHOLD: f64 = 50.0;
const SCALE_FACTOR: f64 = 0.1;

pub fn new_task() -> NewTask {
    NewTask::new(KIND, Queue::Long, json!({}))
}

/// What PostgreSQL's statistics say of one table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableActivity {
    pub name: String,
    /// Rows inserted, updated or deleted since the last `ANALYZE`.
    pub modified: i64,
    /// The planner's row estimate (-1: never analyzed).
    pub rows: f64,
    /// autovacuum is on for the server and not disabled for the table.
    pub autovacuum: bool,
}

/// The tables to analyze now: those autovacuum leaves alone that changed
/// by more than autovacuum's own rule (50 rows plus 10 % of the table).
pub fn stale(tables: &[TableActivity]) -> Vec<&str> {
    tables
        .iter()
        .filter(|table| !table.autovacuum)
        .filter(|table| table.modified as f64 > THRESHOLD + SCALE_FACTOR * table.rows.max(0.0))
        .map(|table| table.name.as_str())
        .collect()
}

/// Whether autovacuum (and the statistics it needs) is on, on PostgreSQL.
pub async fn autovacuum_on(db: &impl ConnectionTrait) -> AppResult<Option<bool>> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(None);
    }
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT current_setting('autovacuum') = 'on' \
             AND current_setting('track_counts') = 'on' AS on",
        ))
        .await?;
    Ok(row.map(|row| row.try_get::<bool>("", "on")).transpose()?)
}

async fn activity(db: &DatabaseConnection) -> AppResult<Vec<TableActivity>> {
    let server = autovacuum_on(db).await?.unwrap_or(false);
    let rows = db
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT s.relname::text AS name, s.n_mod_since_analyze AS modified, \
             c.reltuples::float8 AS rows, \
             COALESCE((SELECT option_value FROM pg_options_to_table(c.reloptions) \
                       WHERE option_name = 'autovacuum_enabled'), 'true') AS table_option \
             FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid \
             WHERE s.schemaname = current_schema()",
        ))
        .await?;
    rows.iter()
        .map(|row| {
            let option: String = row.try_get("", "table_option")?;
            Ok(TableActivity {
                name: row.try_get("", "name")?,
                modified: row.try_get("", "modified")?,
                rows: row.try_get("", "rows")?,
                autovacuum: server && !matches!(option.as_str(), "false" | "off" | "0" | "no"),
            })
        })
        .collect()
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    analyzed: Vec<&'a str>,
}

pub struct AnalyzeHandler;

#[async_trait::async_trait]
impl SingleStage for AnalyzeHandler {
    const KIND: &'static str = KIND;
    const QUEUE: Queue = Queue::Long;
    const STAGE: &'static str = "analyze";
    type Payload = IgnoredAny;

    async fn run(&self, _payload: IgnoredAny, run: &mut StageRun<'_>) -> Result<Value, StageError> {
        if run.db.get_database_backend() != DbBackend::Postgres {
            return Ok(json!({ "analyzed": [] }));
        }
        let tables = activity(run.db).await?;
        let stale = stale(&tables);
        for name in &stale {
            // A name PostgreSQL gave us, quoted as an identifier.
            let sql = format!("ANALYZE \"{}\"", name.replace('"', "\"\""));
            run.db
                .execute_raw(Statement::from_string(DbBackend::Postgres, sql))
                .await?;
        }
        Ok(serde_json::to_value(Report { analyzed: stale }).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, modified: i64, rows: f64, autovacuum: bool) -> TableActivity {
        TableActivity {
            name: name.to_owned(),
            modified,
            rows,
            autovacuum,
        }
    }

    #[test]
    fn only_tables_autovacuum_leaves_alone_and_that_changed_enough() {
        let tables = [
            // Looked after by autovacuum, however much it changed.
            table("watched", 1_000_000, 10.0, true),
            // Never analyzed (-1 rows): 50 changes are not enough, 51 are.
            table("fresh_quiet", 50, -1.0, false),
            table("fresh_busy", 51, -1.0, false),
            // 10,000 rows: more than 50 + 1,000 changes are needed.
            table("big_quiet", 1_050, 10_000.0, false),
            table("big_busy", 1_051, 10_000.0, false),
        ];
        assert_eq!(stale(&tables), ["fresh_busy", "big_busy"]);
    }
}
