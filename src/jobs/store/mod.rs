//! Every read and write of the `tasks`, `idempotency_keys` and `task_scopes`
//! tables. Each state change of a task commits together with its
//! `task.updated` outbox event.
//!
//! Lease safety: every update a worker makes is conditional on
//! `lease_owner = <worker> AND status = 'RUNNING'`, so a worker whose lease
//! was reclaimed can no longer change the task (its stage transaction rolls
//! back with its effects).

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, Utc};
use entity::{idempotency_key, task};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction,
    DbBackend, EntityTrait, QueryFilter, QueryTrait, Set, SqlErr, Statement, Value,
    sea_query::{Expr, ExprTrait},
};
use uuid::Uuid;

pub use super::policy::Finish;
use super::{
    model::{NewTask, Queue, TASK_UPDATED, TaskRecord, TaskStatus, task_event_sql},
    outbox, policy,
};
use crate::error::{AppError, AppResult};

mod claim;
mod enqueue;
mod lease;
mod outcome;
mod write;

pub use self::{claim::*, enqueue::*, lease::*, outcome::*, write::*};

/// Owner key of server-initiated work in `idempotency_keys`.
const SYSTEM_OWNER: &str = "system";

/// The most tasks one statement writes (an insert of many, a claim): its
/// events make one outbox entry, which holds fewer than
/// [`outbox::MAX_EVENTS_PER_ENTRY`].
pub const MAX_TASKS_PER_WRITE: usize = 1000;

/// A builder's `UPDATE` or `INSERT` that returns the rows it wrote.
pub fn returning_all(backend: DbBackend, query: &impl QueryTrait) -> Statement {
    let mut statement = query.build(backend);
    statement.sql.push_str(" RETURNING *");
    statement
}
