//! Personal events, receipt slots and receipts, as stored (seed 003:
//! "persist only confirmed completion").
//!
//! An event is admitted once per fingerprint, together with its delivery
//! task, in one transaction. Before an external write the event reserves
//! a slot under its fingerprint, and records — durably, before the request
//! leaves — that it is about to send; a slot that was sent and has no
//! receipt is an ambiguous outcome, verified by read-back before anything
//! is sent again, whenever that is (a restart included). Confirmation
//! moves the slot to `gateway_receipts` and the event to `CONFIRMED` in
//! one transaction, with the event announced on the outbox
//! (`gatewayEventUpdated`).

use chrono::{DateTime, SubsecRound, Utc};
use entity::{gateway_event, gateway_receipt, gateway_receipt_slot};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set, sea_query::OnConflict,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    action::{Action, ActionKind, RemoteEntry, Retention},
    provider::ProviderKind,
};
use crate::{
    db,
    error::{AppError, AppResult},
    jobs::{
        model::{NewTask, Queue},
        outbox::{self, NewEvent},
        store,
    },
};

/// The outbox topic of an event's changes.
pub const TOPIC: &str = "gateway.event";
/// The delivery task's kind.
pub const DELIVER_KIND: &str = "gateway.deliver";
/// A delivery waits by deferring, which costs no attempt; attempts are
/// spent only when our own database fails, and an event must outlast that.
const DELIVER_MAX_ATTEMPTS: i32 = 1_000;

/// Where an event is. Never a permanent error: an event waits until it is
/// confirmed, or until someone acts.
#[derive(async_graphql::Enum, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventStatus {
    /// Being delivered (or waiting for the provider: a cooldown, an
    /// answer that did not confirm, an ambiguous outcome being verified).
    Pending,
    /// Waiting for the user: the account is not linked, or the provider
    /// refused the credential and the account must be linked again.
    /// Linking resumes it.
    Waiting,
    /// Waiting for an operator: a removal would lose data, the receipt
    /// budget is full, the provider has no such title. `reason` says which.
    Review,
    /// A read-back showed the value: the receipt is recorded.
    Confirmed,
    /// Set aside by its owner or an operator (`dismissGatewayEvent`):
    /// nothing more is sent. A write that may already have gone out keeps
    /// its slot (an unknown reservation never expires by itself).
    Dismissed,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "PENDING",
            EventStatus::Waiting => "WAITING",
            EventStatus::Review => "REVIEW",
            EventStatus::Confirmed => "CONFIRMED",
            EventStatus::Dismissed => "DISMISSED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            EventStatus::Pending,
            EventStatus::Waiting,
            EventStatus::Review,
            EventStatus::Confirmed,
            EventStatus::Dismissed,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }
}

/// An event as the API shows it (and as the outbox carries it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EventView {
    pub id: Uuid,
    pub user_id: Uuid,
    pub provider: ProviderKind,
    pub action: ActionKind,
    pub title_id: String,
    pub value: Value,
    pub occurred_at: DateTime<Utc>,
    /// Provider, account, title, action, value and time, hashed.
    pub fingerprint: String,
    pub status: EventStatus,
    pub reason: Option<String>,
    pub attempts: i32,
    pub task_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub confirmed_at: Option<DateTime<Utc>>,
}

impl EventView {
    pub fn from_row(row: &gateway_event::Model) -> AppResult<Self> {
        let corrupt =
            || AppError::internal(anyhow::anyhow!("gateway event {} is unreadable", row.id));
        Ok(EventView {
            id: row.id,
            user_id: row.user_id,
            provider: ProviderKind::parse(&row.provider).ok_or_else(corrupt)?,
            action: ActionKind::parse(&row.action).ok_or_else(corrupt)?,
            title_id: row.title_id.clone(),
            value: serde_json::from_str(&row.value).map_err(|_| corrupt())?,
            occurred_at: row.occurred_at,
            fingerprint: row.fingerprint.clone(),
            status: EventStatus::parse(&row.status).ok_or_else(corrupt)?,
            reason: row.reason.clone(),
            attempts: row.attempts,
            task_id: row.task_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
            confirmed_at: row.confirmed_at,
        })
    }

    /// The action with its value.
    pub fn action(&self) -> AppResult<Action> {
        Action::from_stored(self.action, &self.value).ok_or_else(|| {
            AppError::internal(anyhow::anyhow!(
                "gateway event {} has no readable value",
                self.id
            ))
        })
    }
}

/// An event to admit.
pub struct Admission {
    pub user: Uuid,
    pub provider: ProviderKind,
    pub title: String,
    pub action: Action,
    pub occurred_at: DateTime<Utc>,
    pub fingerprint: String,
    /// Admitted by the scrobbler: remember the value as the last admitted
    /// for the title and action, in the same transaction.
    pub scrobbled: bool,
}

/// What a delivery may do next with a slot.
pub enum Slot {
    /// Reserved now or earlier, nothing sent yet.
    Fresh,
    /// A write was (about to be) sent and no receipt exists: verify by
    /// read-back before sending again.
    Sent,
    /// The budget of protected and recent entries is full.
    Refused,
}

/// The budgets of seed 003.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    /// Receipt slots plus protected or unexpired receipts, at most.
    pub combined: u64,
    /// Reconciled receipts kept, at most (older ones evicted).
    pub recent_reconciled: u64,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            combined: 100_000,
            recent_reconciled: 1_024,
        }
    }
}

#[derive(Clone)]
pub struct Events {
    db: DatabaseConnection,
    budgets: Budgets,
}

/// Trimmed to the databases' precision, so what we return is what is stored.
fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

impl Events {
    pub fn new(db: DatabaseConnection, budgets: Budgets) -> Self {
        Events { db, budgets }
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Admits an event with its delivery task, or returns the event its
    /// fingerprint already has (a replay: nothing new is sent). An event
    /// whose fingerprint has a receipt is confirmed at once, without any
    /// upstream call. The task, if one was made, is returned for the
    /// runner to be told.
    pub async fn admit(
        &self,
        admission: Admission,
    ) -> AppResult<(EventView, Option<entity::task::Model>)> {
        if let Some(existing) = self.by_fingerprint(&admission.fingerprint).await? {
            return Ok((EventView::from_row(&existing)?, None));
        }
        let receipt = gateway_receipt::Entity::find_by_id(admission.fingerprint.clone())
            .one(&self.db)
            .await?;
        let id = Uuid::now_v7();
        let at = now();
        let (status, reason, confirmed_at) = match &receipt {
            Some(_) => (
                EventStatus::Confirmed,
                Some("already confirmed: its receipt exists, nothing was sent".to_owned()),
                Some(at),
            ),
            None => (EventStatus::Pending, None, None),
        };
        let txn = db::begin_write(&self.db).await?;
        let task = match status {
            EventStatus::Pending => Some(
                store::insert_task(
                    &*txn,
                    &deliver_task(admission.user, id),
                    Uuid::now_v7(),
                    DELIVER_MAX_ATTEMPTS,
                )
                .await?,
            ),
            _ => None,
        };
        let row = gateway_event::ActiveModel {
            id: Set(id),
            user_id: Set(admission.user),
            provider: Set(admission.provider.as_str().to_owned()),
            action: Set(admission.action.kind().as_str().to_owned()),
            title_id: Set(admission.title),
            value: Set(admission.action.value().to_string()),
            occurred_at: Set(admission.occurred_at),
            fingerprint: Set(admission.fingerprint.clone()),
            status: Set(status.as_str().to_owned()),
            reason: Set(reason),
            attempts: Set(0),
            task_id: Set(task.as_ref().map(|task| task.id)),
            created_at: Set(at),
            updated_at: Set(at),
            confirmed_at: Set(confirmed_at),
        };
        let inserted = gateway_event::Entity::insert(row)
            .on_conflict(
                OnConflict::column(gateway_event::Column::Fingerprint)
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&*txn)
            .await?;
        if inserted == 0 {
            // The same event was admitted meanwhile: that one stands.
            txn.rollback().await?;
            let existing = self
                .by_fingerprint(&admission.fingerprint)
                .await?
                .ok_or_else(|| AppError::internal(anyhow::anyhow!("a raced event vanished")))?;
            return Ok((EventView::from_row(&existing)?, None));
        }
        let row = gateway_event::Entity::find_by_id(id)
            .one(&*txn)
            .await?
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("an admitted event vanished")))?;
        let view = EventView::from_row(&row)?;
        announce(&*txn, &view).await?;
        if admission.scrobbled {
            remember_scrobbled(&*txn, &view).await?;
        }
        txn.commit().await?;
        Ok((view, task))
    }

    async fn by_fingerprint(&self, fingerprint: &str) -> AppResult<Option<gateway_event::Model>> {
        Ok(gateway_event::Entity::find()
            .filter(gateway_event::Column::Fingerprint.eq(fingerprint))
            .one(&self.db)
            .await?)
    }

    pub async fn get(&self, id: Uuid) -> AppResult<Option<EventView>> {
        self.get_in(&self.db, id).await
    }

    /// The user's events (`None`: everyone's), newest first, optionally
    /// of one status.
    pub fn list(
        &self,
        user: Option<Uuid>,
        status: Option<EventStatus>,
    ) -> sea_orm::Select<gateway_event::Entity> {
        let mut select = gateway_event::Entity::find();
        if let Some(user) = user {
            select = select.filter(gateway_event::Column::UserId.eq(user));
        }
        if let Some(status) = status {
            select = select.filter(gateway_event::Column::Status.eq(status.as_str()));
        }
        select
    }

    /// The user's receipts.
    pub fn receipts(&self, user: Uuid) -> sea_orm::Select<gateway_receipt::Entity> {
        gateway_receipt::Entity::find().filter(gateway_receipt::Column::UserId.eq(user))
    }

    /// Whether `event` is the oldest unfinished event of its account and
    /// title: writes for one title go one at a time, in order.
    pub async fn is_first_in_line(&self, event: &EventView) -> AppResult<bool> {
        let first = gateway_event::Entity::find()
            .filter(gateway_event::Column::UserId.eq(event.user_id))
            .filter(gateway_event::Column::Provider.eq(event.provider.as_str()))
            .filter(gateway_event::Column::TitleId.eq(event.title_id.as_str()))
            .filter(gateway_event::Column::Status.eq(EventStatus::Pending.as_str()))
            .order_by_asc(gateway_event::Column::Id)
            .select_only()
            .column(gateway_event::Column::Id)
            .into_tuple::<Uuid>()
            .one(&self.db)
            .await?;
        Ok(first.is_none_or(|first| first == event.id))
    }

    /// The receipt of a fingerprint, if confirmed.
    pub async fn receipt(&self, fingerprint: &str) -> AppResult<Option<gateway_receipt::Model>> {
        Ok(gateway_receipt::Entity::find_by_id(fingerprint.to_owned())
            .one(&self.db)
            .await?)
    }

    /// Reserves the event's slot (or finds it reserved), within the budget.
    pub async fn reserve(&self, event: &EventView, fingerprint: &str) -> AppResult<Slot> {
        if let Some(slot) = gateway_receipt_slot::Entity::find_by_id(fingerprint.to_owned())
            .one(&self.db)
            .await?
        {
            return Ok(if slot.sent_at.is_some() {
                Slot::Sent
            } else {
                Slot::Fresh
            });
        }
        let txn = db::begin_write(&self.db).await?;
        let at = now();
        let slots = gateway_receipt_slot::Entity::find().count(&*txn).await?;
        let kept = gateway_receipt::Entity::find()
            .filter(
                sea_orm::Condition::any()
                    .add(gateway_receipt::Column::ExpiresAt.is_null())
                    .add(gateway_receipt::Column::ExpiresAt.gt(at)),
            )
            .count(&*txn)
            .await?;
        if slots + kept >= self.budgets.combined {
            txn.rollback().await?;
            return Ok(Slot::Refused);
        }
        gateway_receipt_slot::Entity::insert(gateway_receipt_slot::ActiveModel {
            fingerprint: Set(fingerprint.to_owned()),
            event_id: Set(event.id),
            user_id: Set(event.user_id),
            provider: Set(event.provider.as_str().to_owned()),
            title_id: Set(event.title_id.clone()),
            reserved_at: Set(at),
            sent_at: Set(None),
        })
        .on_conflict(
            OnConflict::column(gateway_receipt_slot::Column::Fingerprint)
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(&*txn)
        .await?;
        txn.commit().await?;
        Ok(Slot::Fresh)
    }

    /// Records, before the request leaves, that a write is being sent: from
    /// now on its outcome is unknown until a read-back says.
    pub async fn mark_sent(&self, fingerprint: &str) -> AppResult<()> {
        let txn = db::begin_write(&self.db).await?;
        gateway_receipt_slot::Entity::update_many()
            .col_expr(gateway_receipt_slot::Column::SentAt, now().into())
            .filter(gateway_receipt_slot::Column::Fingerprint.eq(fingerprint))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Forgets a slot nothing was sent for (the event went to review).
    pub async fn release(&self, fingerprint: &str) -> AppResult<()> {
        let txn = db::begin_write(&self.db).await?;
        gateway_receipt_slot::Entity::delete_many()
            .filter(gateway_receipt_slot::Column::Fingerprint.eq(fingerprint))
            .filter(gateway_receipt_slot::Column::SentAt.is_null())
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Confirms the event: its slot becomes a receipt holding the read-back
    /// that showed the value, the event `CONFIRMED`; reconciled receipts
    /// beyond the budget are evicted, oldest first.
    pub async fn confirm(
        &self,
        event: &EventView,
        fingerprint: &str,
        action: &Action,
        entry: &RemoteEntry,
        sent: bool,
    ) -> AppResult<EventView> {
        let at = now();
        let retention = action.retention();
        let txn = db::begin_write(&self.db).await?;
        gateway_receipt::Entity::insert(gateway_receipt::ActiveModel {
            fingerprint: Set(fingerprint.to_owned()),
            event_id: Set(event.id),
            user_id: Set(event.user_id),
            provider: Set(event.provider.as_str().to_owned()),
            action: Set(event.action.as_str().to_owned()),
            title_id: Set(event.title_id.clone()),
            response: Set(Value::Object(entry.fields.clone()).to_string()),
            retention: Set(retention.as_str().to_owned()),
            created_at: Set(at),
            expires_at: Set(retention.expires_at(at)),
        })
        .on_conflict(
            OnConflict::column(gateway_receipt::Column::Fingerprint)
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(&*txn)
        .await?;
        gateway_receipt_slot::Entity::delete_by_id(fingerprint.to_owned())
            .exec(&*txn)
            .await?;
        if retention == Retention::Reconciled {
            evict_reconciled(&*txn, self.budgets.recent_reconciled).await?;
        }
        let reason = (!sent).then(|| "the provider already showed it: nothing was sent".to_owned());
        let view = self
            .update(&*txn, event.id, EventStatus::Confirmed, reason, Some(at), 0)
            .await?;
        txn.commit().await?;
        Ok(view)
    }

    /// Parks or annotates the event: a new status and reason, `attempts`
    /// more attempts.
    pub async fn set_status(
        &self,
        event: &EventView,
        status: EventStatus,
        reason: Option<String>,
        attempts: i32,
    ) -> AppResult<EventView> {
        let txn = db::begin_write(&self.db).await?;
        let view = self
            .update(&*txn, event.id, status, reason, None, attempts)
            .await?;
        txn.commit().await?;
        Ok(view)
    }

    async fn update(
        &self,
        txn: &impl ConnectionTrait,
        id: Uuid,
        status: EventStatus,
        reason: Option<String>,
        confirmed_at: Option<DateTime<Utc>>,
        more_attempts: i32,
    ) -> AppResult<EventView> {
        let row = gateway_event::Entity::find_by_id(id)
            .one(txn)
            .await?
            .ok_or(AppError::NotFound("gateway event"))?;
        let attempts = row.attempts.saturating_add(more_attempts);
        let mut active: gateway_event::ActiveModel = row.into();
        active.status = Set(status.as_str().to_owned());
        active.reason = Set(reason);
        active.attempts = Set(attempts);
        active.updated_at = Set(now());
        if confirmed_at.is_some() {
            active.confirmed_at = Set(confirmed_at);
        }
        let row = active.update(txn).await?;
        let view = EventView::from_row(&row)?;
        announce(txn, &view).await?;
        Ok(view)
    }

    /// Resumes the user's events that waited for a link to `provider`:
    /// each goes back to `PENDING` with a new delivery task.
    pub async fn resume_waiting(
        &self,
        user: Uuid,
        provider: ProviderKind,
    ) -> AppResult<Vec<entity::task::Model>> {
        let txn = db::begin_write(&self.db).await?;
        let waiting = gateway_event::Entity::find()
            .filter(gateway_event::Column::UserId.eq(user))
            .filter(gateway_event::Column::Provider.eq(provider.as_str()))
            .filter(gateway_event::Column::Status.eq(EventStatus::Waiting.as_str()))
            .order_by_asc(gateway_event::Column::Id)
            .all(&*txn)
            .await?;
        let tasks = redeliver(&*txn, waiting, "resumed: the account was linked").await?;
        txn.commit().await?;
        Ok(tasks)
    }

    /// Sends a parked event (`REVIEW` or `WAITING`) back to delivery with a
    /// new task, as its owner or an operator asked; `CONFLICT` for one
    /// that is pending, confirmed or dismissed.
    pub async fn retry(&self, event: &EventView) -> AppResult<(EventView, entity::task::Model)> {
        let txn = db::begin_write(&self.db).await?;
        let row = self.parked(&*txn, event.id).await?;
        let task = redeliver(&*txn, vec![row], "retried on request")
            .await?
            .pop()
            .expect("one event, one task");
        let view = self
            .get_in(&*txn, event.id)
            .await?
            .ok_or(AppError::NotFound("gateway event"))?;
        txn.commit().await?;
        Ok((view, task))
    }

    /// Sets a parked event (`REVIEW` or `WAITING`) aside: `DISMISSED`,
    /// nothing more is sent; a slot nothing was sent for is released.
    pub async fn dismiss(&self, event: &EventView) -> AppResult<EventView> {
        let txn = db::begin_write(&self.db).await?;
        let row = self.parked(&*txn, event.id).await?;
        gateway_receipt_slot::Entity::delete_many()
            .filter(gateway_receipt_slot::Column::Fingerprint.eq(&row.fingerprint))
            .filter(gateway_receipt_slot::Column::SentAt.is_null())
            .exec(&*txn)
            .await?;
        let view = self
            .update(
                &*txn,
                row.id,
                EventStatus::Dismissed,
                Some("dismissed on request: nothing more is sent".into()),
                None,
                0,
            )
            .await?;
        txn.commit().await?;
        Ok(view)
    }

    /// The event, read in the transaction, if it is parked.
    async fn parked(
        &self,
        txn: &impl ConnectionTrait,
        id: Uuid,
    ) -> AppResult<gateway_event::Model> {
        let row = gateway_event::Entity::find_by_id(id)
            .one(txn)
            .await?
            .ok_or(AppError::NotFound("gateway event"))?;
        let status = EventStatus::parse(&row.status);
        if !matches!(status, Some(EventStatus::Review | EventStatus::Waiting)) {
            return Err(AppError::Conflict(format!(
                "only an event waiting for review or for its user can be retried or dismissed; this one is {}",
                row.status
            )));
        }
        Ok(row)
    }

    async fn get_in(&self, txn: &impl ConnectionTrait, id: Uuid) -> AppResult<Option<EventView>> {
        gateway_event::Entity::find_by_id(id)
            .one(txn)
            .await?
            .as_ref()
            .map(EventView::from_row)
            .transpose()
    }

    /// Gives a new delivery task to every pending event whose task is no
    /// longer queued or running (it ran out of attempts on our own
    /// database's trouble, or was cancelled, or swept): an event is never
    /// left without a driver.
    pub async fn resume_orphans(&self) -> AppResult<Vec<entity::task::Model>> {
        let txn = db::begin_write(&self.db).await?;
        let live = sea_orm::sea_query::Query::select()
            .column(entity::task::Column::Id)
            .from(entity::task::Entity)
            .and_where(
                entity::task::Column::Status
                    .is_in([entity::task::Status::Queued, entity::task::Status::Running]),
            )
            .to_owned();
        let orphans = gateway_event::Entity::find()
            .filter(gateway_event::Column::Status.eq(EventStatus::Pending.as_str()))
            .filter(
                sea_orm::Condition::any()
                    .add(gateway_event::Column::TaskId.is_null())
                    .add(gateway_event::Column::TaskId.not_in_subquery(live)),
            )
            .order_by_asc(gateway_event::Column::Id)
            .limit(1_000)
            .all(&*txn)
            .await?;
        let tasks = redeliver(&*txn, orphans, "resumed: its delivery task had ended").await?;
        txn.commit().await?;
        Ok(tasks)
    }

    /// Deletes reconciled receipts past their expiry; how many.
    pub async fn expire_receipts(&self, now: DateTime<Utc>) -> AppResult<u64> {
        let txn = db::begin_write(&self.db).await?;
        let deleted = gateway_receipt::Entity::delete_many()
            .filter(gateway_receipt::Column::Retention.eq(Retention::Reconciled.as_str()))
            .filter(gateway_receipt::Column::ExpiresAt.lte(now))
            .exec(&*txn)
            .await?
            .rows_affected;
        txn.commit().await?;
        Ok(deleted)
    }
}

/// Each event back to `PENDING` with a new delivery task, in the caller's
/// transaction.
async fn redeliver(
    txn: &impl ConnectionTrait,
    rows: Vec<gateway_event::Model>,
    reason: &str,
) -> AppResult<Vec<entity::task::Model>> {
    let mut tasks = Vec::with_capacity(rows.len());
    for row in rows {
        let task = store::insert_task(
            txn,
            &deliver_task(row.user_id, row.id),
            Uuid::now_v7(),
            DELIVER_MAX_ATTEMPTS,
        )
        .await?;
        let mut active: gateway_event::ActiveModel = row.into();
        active.status = Set(EventStatus::Pending.as_str().to_owned());
        active.reason = Set(Some(reason.to_owned()));
        active.task_id = Set(Some(task.id));
        active.updated_at = Set(now());
        let row = active.update(txn).await?;
        announce(txn, &EventView::from_row(&row)?).await?;
        tasks.push(task);
    }
    Ok(tasks)
}

/// The task that delivers one event.
fn deliver_task(user: Uuid, event: Uuid) -> NewTask {
    let mut new = NewTask::new(DELIVER_KIND, Queue::Short, json!({ "event": event }));
    new.owner_id = Some(user);
    new.first_stage = Some("deliver");
    new.max_attempts = Some(DELIVER_MAX_ATTEMPTS);
    new
}

/// Writes the event's new state to the outbox, in the caller's transaction.
async fn announce(txn: &impl ConnectionTrait, view: &EventView) -> AppResult<()> {
    outbox::emit(
        txn,
        vec![NewEvent {
            topic: TOPIC,
            aggregate_id: view.id.to_string(),
            owner_id: Some(view.user_id),
            payload: serde_json::to_value(view).map_err(AppError::internal)?,
        }],
    )
    .await
}

/// Records what the scrobbler admitted for a title and action.
async fn remember_scrobbled(txn: &impl ConnectionTrait, view: &EventView) -> AppResult<()> {
    use entity::gateway_scrobble_mark::{ActiveModel, Column, Entity};
    Entity::insert(ActiveModel {
        user_id: Set(view.user_id),
        media_id: Set(view.title_id.clone()),
        action: Set(view.action.as_str().to_owned()),
        value: Set(view.value.to_string()),
        updated_at: Set(view.created_at),
    })
    .on_conflict(
        OnConflict::columns([Column::UserId, Column::MediaId, Column::Action])
            .update_columns([Column::Value, Column::UpdatedAt])
            .to_owned(),
    )
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// Keeps the newest `keep` reconciled receipts; older ones go (a read-back
/// can always answer for them again).
async fn evict_reconciled(txn: &impl ConnectionTrait, keep: u64) -> AppResult<()> {
    let kept = gateway_receipt::Entity::find()
        .filter(gateway_receipt::Column::Retention.eq(Retention::Reconciled.as_str()))
        .count(txn)
        .await?;
    if kept <= keep {
        return Ok(());
    }
    let oldest: Vec<String> = gateway_receipt::Entity::find()
        .filter(gateway_receipt::Column::Retention.eq(Retention::Reconciled.as_str()))
        .order_by_asc(gateway_receipt::Column::CreatedAt)
        .order_by_asc(gateway_receipt::Column::Fingerprint)
        .limit(kept - keep)
        .select_only()
        .column(gateway_receipt::Column::Fingerprint)
        .into_tuple()
        .all(txn)
        .await?;
    gateway_receipt::Entity::delete_many()
        .filter(gateway_receipt::Column::Fingerprint.is_in(oldest))
        .exec(txn)
        .await?;
    Ok(())
}
