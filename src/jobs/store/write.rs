//! Writing task rows with their `task.updated` events in one statement,
//! and the group commit's end-and-claim.

use super::*;

/// Emits the tasks' current states as `task.updated` events.
pub async fn emit_tasks_updated(
    txn: &impl ConnectionTrait,
    models: &[task::Model],
) -> AppResult<()> {
    let mut events = Vec::with_capacity(models.len());
    for model in models {
        events.push(outbox::NewEvent {
            topic: TASK_UPDATED,
            aggregate_id: model.id.to_string(),
            owner_id: model.owner_id,
            payload: serde_json::to_value(TaskRecord::from(model)).map_err(AppError::internal)?,
        });
    }
    outbox::emit(txn, events).await
}

/// Emits one task's current state as a `task.updated` event.
pub async fn emit_task_updated(txn: &impl ConnectionTrait, model: &task::Model) -> AppResult<()> {
    emit_tasks_updated(txn, std::slice::from_ref(model)).await
}

/// Runs a statement that writes `tasks` rows and returns them (`…
/// RETURNING *`), and records each written row's `task.updated` event, in
/// the caller's transaction.
///
/// On PostgreSQL the same statement stores the events as one outbox entry
/// ([`with_task_events`]). Elsewhere each event is rendered here and
/// emitted after the statement.
pub async fn write_tasks_in(
    conn: &impl ConnectionTrait,
    statement: Statement,
) -> AppResult<Vec<task::Model>> {
    if conn.get_database_backend() != DbBackend::Postgres {
        let models = task::Entity::find()
            .from_raw_sql(statement)
            .all(conn)
            .await?;
        emit_tasks_updated(conn, &models).await?;
        return Ok(models);
    }
    Ok(task::Entity::find()
        .from_raw_sql(with_task_events(vec![statement], |_| {
            "SELECT * FROM t".into()
        }))
        .all(conn)
        .await?)
}

/// PostgreSQL: `parts` — statements that write `tasks` rows and return
/// them, no two writing the same row — as one statement that also stores
/// their `task.updated` events as one outbox entry: a typed snapshot of
/// each written row ([`task_event_sql`]), nothing rendered in SQL, one row
/// however many tasks. In it the parts are named `w0`, `w1`…, and `t` is
/// every written row; `select(names)` is what the statement answers. One
/// statement, one round trip, no transaction around it; the publisher
/// renders the events.
pub(super) fn with_task_events(
    parts: Vec<Statement>,
    select: impl FnOnce(&[String]) -> String,
) -> Statement {
    let mut ctes = Vec::with_capacity(parts.len());
    let mut names = Vec::with_capacity(parts.len());
    let mut values = Vec::new();
    for (index, part) in parts.into_iter().enumerate() {
        let name = format!("w{index}");
        ctes.push(format!(
            "{name} AS ({})",
            crate::db::shift_placeholders(&part.sql, values.len())
        ));
        values.extend(part.values.map(|values| values.0).unwrap_or_default());
        names.push(name);
    }
    let every: Vec<String> = names
        .iter()
        .map(|name| format!("SELECT * FROM {name}"))
        .collect();
    // Without a `GROUP BY` the aggregate yields one row even for no
    // tasks; `HAVING` keeps a write that matched nothing from storing an
    // empty entry.
    let sql = format!(
        "WITH {}, t AS ({}), e AS (INSERT INTO outbox_events (topic, tasks, created_at) \
         SELECT '{TASK_UPDATED}', array_agg({} ORDER BY t.id), now() FROM t \
         HAVING count(*) > 0) \
         {}",
        ctes.join(", "),
        every.join(" UNION ALL "),
        task_event_sql(),
        select(&names)
    );
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// [`write_tasks_in`] for several statements that commit together (on
/// PostgreSQL a single statement needs no transaction around it).
pub async fn write_tasks(
    db: &DatabaseConnection,
    mut statements: Vec<Statement>,
) -> AppResult<Vec<task::Model>> {
    if statements.len() == 1 && db.get_database_backend() == DbBackend::Postgres {
        return write_tasks_in(db, statements.remove(0)).await;
    }
    let txn = crate::db::begin_write(db).await?;
    let mut models = Vec::new();
    for statement in statements {
        models.extend(write_tasks_in(&txn, statement).await?);
    }
    txn.commit().await?;
    Ok(models)
}

/// Commits `ends` (statements that end tasks) and `claims` (from
/// [`claim_statement`]) together, and returns the ids the ends wrote and
/// the rows the claims took: a group commit that hands freed slots their
/// next tasks. No two may write the same row (an end writes running tasks,
/// a claim queued ones). On PostgreSQL it is one statement, and the ended
/// rows do not travel back.
pub async fn end_and_claim(
    db: &DatabaseConnection,
    ends: Vec<Statement>,
    claims: Vec<Statement>,
) -> AppResult<(Vec<Uuid>, Vec<task::Model>)> {
    if db.get_database_backend() != DbBackend::Postgres {
        // Immediate on SQLite: the commit waits its turn for the write
        // lock behind other writers rather than fail to upgrade to it.
        let txn = crate::db::begin_write(db).await?;
        let mut ended = Vec::new();
        for end in ends {
            ended.extend(
                write_tasks_in(&txn, end)
                    .await?
                    .into_iter()
                    .map(|model| model.id),
            );
        }
        let mut claimed = Vec::new();
        for claim in claims {
            claimed.extend(write_tasks_in(&txn, claim).await?);
        }
        txn.commit().await?;
        return Ok((ended, claimed));
    }
    let end_count = ends.len();
    let parts: Vec<Statement> = ends.into_iter().chain(claims).collect();
    // One row at least (the ended ids), then one per claimed task.
    let statement = with_task_events(parts, |names| {
        let (ends, claims) = names.split_at(end_count);
        let ended: Vec<String> = ends
            .iter()
            .map(|name| format!("SELECT id FROM {name}"))
            .collect();
        let claimed: Vec<String> = claims
            .iter()
            .map(|name| format!("SELECT * FROM {name}"))
            .collect();
        let ended = if ended.is_empty() {
            "SELECT NULL::uuid AS id WHERE false".to_owned()
        } else {
            ended.join(" UNION ALL ")
        };
        let claimed = if claimed.is_empty() {
            "SELECT * FROM tasks WHERE false".to_owned()
        } else {
            claimed.join(" UNION ALL ")
        };
        format!(
            "SELECT x.ended_ids, c.* FROM (SELECT array_agg(id) AS ended_ids FROM ({ended}) i) x \
             LEFT JOIN ({claimed}) c ON true"
        )
    });
    let rows = db.query_all_raw(statement).await?;
    let mut ended = Vec::new();
    let mut claimed = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        if index == 0 {
            ended = row
                .try_get::<Option<Vec<Uuid>>>("", "ended_ids")?
                .unwrap_or_default();
        }
        if row.try_get::<Option<Uuid>>("", "id")?.is_some() {
            claimed.push(<task::Model as sea_orm::FromQueryResult>::from_query_result(row, "")?);
        }
    }
    Ok((ended, claimed))
}
