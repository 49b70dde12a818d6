//! Task events: delivered one by one, in order across late commits, and
//! the stored snapshots across migrations.

use chrono::Utc;
use sea_orm::{ConnectionTrait, Statement, TransactionTrait};
use serde_json::{Value, json};

use crate::{
    helpers::{AppOptions, Backend, spawn_app_with},
    websocket::{next, subscribe},
};

use super::{fast_retries, probe, time, wait_terminal};

crate::on_every_runner!(the_events_of_one_task_write_are_delivered_one_by_one,);

crate::per_backend!(
    [postgres => Postgres, postgres_redis => PostgresRedis];
    an_event_committed_late_is_published_before_its_aggregates_next,
);

crate::per_backend!(
    [postgres => Postgres];
    the_task_event_type_holds_the_snapshot_columns,
    task_event_snapshots_migrate_down_to_one_event_rows,
);

crate::on_both_backends!(events_unpublished_before_publication_became_a_position_are_published,);

/// A task's JSON with its timestamps (`…At`) parsed, so that two
/// spellings of one instant (SQL's six digits, chrono's as few as needed)
/// compare equal.
fn same_instants(mut task: Value) -> Value {
    for (key, value) in task.as_object_mut().unwrap() {
        if key.ends_with("At") && value.is_string() {
            *value = json!(time(value).timestamp_micros());
        }
    }
    task
}

/// Undoing `m20261201_000010_task_event_snapshots` turns each stored
/// snapshot back into the one-event row an earlier version reads, with
/// the payload the publisher would have rendered; redoing it keeps them.
async fn task_event_snapshots_migrate_down_to_one_event_rows(backend: Backend) {
    use migration::MigratorTrait;

    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    migration::Migrator::up(&db, None).await.unwrap();
    let new = trellis::jobs::model::NewTask::new(
        "system.probe",
        trellis::jobs::model::Queue::Short,
        json!({ "stages": 1 }),
    );
    let ids = [uuid::Uuid::now_v7(), uuid::Uuid::now_v7()];
    let txn = db.begin().await.unwrap();
    trellis::jobs::store::insert_tasks(&txn, &[(ids[0], &new), (ids[1], &new)], 3)
        .await
        .unwrap();
    txn.commit().await.unwrap();
    let rendered = trellis::jobs::outbox::stored_events(&db, "task.updated")
        .await
        .unwrap();
    assert_eq!(rendered.len(), 2);

    // Down to just before the snapshot migration, whatever came after it.
    let after = {
        use migration::MigratorTrait;
        let names: Vec<String> = migration::Migrator::migrations()
            .iter()
            .map(|m| m.name().to_owned())
            .collect();
        let at = names
            .iter()
            .position(|name| name == "m20261201_000010_task_event_snapshots")
            .unwrap();
        (names.len() - at) as u32
    };
    migration::Migrator::down(&db, Some(after)).await.unwrap();
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT aggregate_id, CAST(payload AS TEXT) AS payload FROM outbox_events ORDER BY id",
        ))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "one row per event");
    for (row, event) in rows.iter().zip(&rendered) {
        assert_eq!(
            row.try_get::<String>("", "aggregate_id").unwrap(),
            event.aggregate_id
        );
        let payload: Value =
            serde_json::from_str(&row.try_get::<String>("", "payload").unwrap()).unwrap();
        assert_eq!(
            same_instants(payload),
            same_instants(event.payload::<Value>().unwrap())
        );
    }

    migration::Migrator::up(&db, None).await.unwrap();
    let again = trellis::jobs::outbox::stored_events(&db, "task.updated")
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|e| e.payload::<Value>())
            .collect::<Vec<_>>(),
        rendered
            .iter()
            .map(|e| e.payload::<Value>())
            .collect::<Vec<_>>()
    );
    db.close().await.unwrap();
}

/// The SQL type a task write snapshots its rows into has the attributes,
/// in order, that the write fills and the publisher reads back.
async fn the_task_event_type_holds_the_snapshot_columns(backend: Backend) {
    let app = spawn_app_with(backend, AppOptions::default()).await;
    let db = app.database().await;
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT a.attname::text AS name FROM pg_attribute a JOIN pg_type t ON t.typrelid = a.attrelid \
             WHERE t.typname = 'task_event' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        ))
        .await
        .unwrap();
    let names: Vec<String> = rows
        .iter()
        .map(|row| row.try_get::<String>("", "name").unwrap())
        .collect();
    assert_eq!(names, trellis::jobs::model::TASK_EVENT_COLUMNS);
}

/// Tasks written by one statement (here three inserted at once, as a bulk
/// enqueue does) have their events stored together — on PostgreSQL as one
/// outbox entry of row snapshots — and delivered one by one: each with its
/// own id, its task as aggregate, and that task as payload.
async fn the_events_of_one_task_write_are_delivered_one_by_one(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let mut socket = subscribe(
        &app,
        &admin.access,
        "e",
        "subscription { events(topics: [\"task.updated\"]) { id aggregateId payload } }",
        json!({}),
    )
    .await;
    // The subscription is live once an event sent after it arrives.
    let ready = probe(&app, &admin.access, json!({ "effects": false })).await;
    loop {
        let message = next(&mut socket).await.unwrap();
        if message["payload"]["data"]["events"]["aggregateId"] == ready.as_str() {
            break;
        }
    }

    let db = app.database().await;
    let new = trellis::jobs::model::NewTask::new(
        "system.probe",
        trellis::jobs::model::Queue::Short,
        json!({ "stages": 1, "sleepMs": 0, "failAttempts": 0, "effects": false }),
    );
    let ids: Vec<uuid::Uuid> = (0..3).map(|_| uuid::Uuid::now_v7()).collect();
    let txn = db.begin().await.unwrap();
    let rows: Vec<(uuid::Uuid, &trellis::jobs::model::NewTask)> =
        ids.iter().map(|id| (*id, &new)).collect();
    let inserted = trellis::jobs::store::insert_tasks(&txn, &rows, 3)
        .await
        .unwrap();
    txn.commit().await.unwrap();
    assert_eq!(inserted.iter().map(|t| t.id).collect::<Vec<_>>(), ids);

    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        // The entry that holds the first one's QUEUED snapshot (workers
        // may have claimed some already: later entries).
        let entry = db
            .query_one_raw(Statement::from_sql_and_values(
                sea_orm::DbBackend::Postgres,
                "SELECT cardinality(o.tasks) AS n FROM outbox_events o WHERE EXISTS \
                 (SELECT 1 FROM unnest(o.tasks) s WHERE s.id = $1 AND s.status = 'QUEUED') \
                 ORDER BY o.id LIMIT 1",
                vec![ids[0].into()],
            ))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            entry.try_get::<i32>("", "n").unwrap(),
            3,
            "one entry for the three"
        );
    }

    // Their QUEUED events, in order, each once (later ones may follow as
    // the workers run them, and a periodic task's may come between).
    let ours: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let mut queued = Vec::new();
    while queued.len() < 3 {
        let event = next(&mut socket).await.unwrap()["payload"]["data"]["events"].clone();
        let mine = event["aggregateId"]
            .as_str()
            .is_some_and(|id| ours.iter().any(|our| our == id));
        if mine && event["payload"]["status"] == "QUEUED" {
            queued.push(event);
        }
    }
    let aggregates: Vec<String> = queued
        .iter()
        .map(|event| event["aggregateId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        aggregates,
        ids.iter().map(|id| id.to_string()).collect::<Vec<_>>()
    );
    for event in &queued {
        assert_eq!(event["payload"]["id"], event["aggregateId"]);
        assert_eq!(event["payload"]["kind"], "system.probe");
    }
    let event_ids: Vec<i64> = queued
        .iter()
        .map(|event| event["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        event_ids.windows(2).all(|pair| pair[0] < pair[1]),
        "distinct ids in order: {event_ids:?}"
    );
    // And all three run to the end.
    for id in &ids {
        assert_eq!(
            wait_terminal(&app, &admin.access, &id.to_string()).await["status"],
            "SUCCEEDED"
        );
    }
}

/// The publisher reads the outbox by id. An event whose transaction was
/// still open when later ids were published (a gap) is published once it
/// commits, and before the next event of its aggregate. (SQLite has one
/// writer at a time, so ids commit in order there.)
async fn an_event_committed_late_is_published_before_its_aggregates_next(backend: Backend) {
    let app = spawn_app_with(backend, AppOptions::default()).await;
    let admin = app.admin().await;
    let mut socket = subscribe(
        &app,
        &admin.access,
        "e",
        "subscription { events(topics: [\"probe.order\"]) { id aggregateId payload } }",
        json!({}),
    )
    .await;
    let db = app.database().await;
    let insert = |label: &str, aggregate: &str| {
        Statement::from_sql_and_values(
            db.get_database_backend(),
            "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at) \
             VALUES ('probe.order', $1, NULL, $2, $3)",
            vec![
                aggregate.into(),
                json!({ "label": label }).into(),
                Utc::now().into(),
            ],
        )
    };
    let received = |message: Value| -> (i64, String) {
        let event = &message["payload"]["data"]["events"];
        (
            event["id"].as_str().unwrap().parse().unwrap(),
            event["payload"]["label"].as_str().unwrap().to_owned(),
        )
    };
    // The subscription is live once an event sent after it arrives.
    db.execute_raw(insert("ready", "x")).await.unwrap();
    assert_eq!(received(next(&mut socket).await.unwrap()).1, "ready");

    // `late` takes its id, then waits while `other` is published after it.
    let open_txn = db.begin().await.unwrap();
    open_txn.execute_raw(insert("late", "a")).await.unwrap();
    db.execute_raw(insert("other", "b")).await.unwrap();
    let (other_id, label) = received(next(&mut socket).await.unwrap());
    assert_eq!(label, "other");
    open_txn.commit().await.unwrap();
    // The aggregate's next event follows the late one.
    db.execute_raw(insert("after", "a")).await.unwrap();
    let (late_id, first) = received(next(&mut socket).await.unwrap());
    let (_, second) = received(next(&mut socket).await.unwrap());
    assert_eq!((first.as_str(), second.as_str()), ("late", "after"));
    assert!(late_id < other_id, "the late event's id came before");
}

/// Migrating a database whose outbox still marked events one by one loses
/// none: events published before stay published, and one not yet
/// published is behind the new position, so the publisher sends it.
async fn events_unpublished_before_publication_became_a_position_are_published(backend: Backend) {
    use migration::MigratorTrait;

    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    // Up to the migration before `m20261201_000008_outbox_position`.
    migration::Migrator::up(&db, Some(7)).await.unwrap();
    let now = Utc::now();
    for (label, published) in [("old", Some(now)), ("pending", None)] {
        db.execute_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at, \
             published_at) VALUES ('probe.order', 'a', NULL, $1, $2, $3)",
            vec![
                json!({ "label": label }).into(),
                now.into(),
                published.into(),
            ],
        ))
        .await
        .unwrap();
    }
    assert_eq!(
        trellis::jobs::outbox::unpublished(&db).await.ok(),
        None,
        "no position yet"
    );

    migration::Migrator::up(&db, None).await.unwrap();
    assert_eq!(trellis::jobs::outbox::unpublished(&db).await.unwrap(), 1);
    // A new event after the migration is pending too.
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at) \
         VALUES ('probe.order', 'a', NULL, $1, $2)",
        vec![json!({ "label": "after" }).into(), now.into()],
    ))
    .await
    .unwrap();
    assert_eq!(trellis::jobs::outbox::unpublished(&db).await.unwrap(), 2);
    db.close().await.unwrap();
}
