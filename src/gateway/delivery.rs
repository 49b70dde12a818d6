//! Delivering one personal event (the runner's `gateway.deliver` task):
//!
//! 1. Only the oldest unfinished event of an account and title runs; a
//!    later one waits its turn (writes to one title never overlap; other
//!    titles run in parallel).
//! 2. The user's own credential or nothing: without a working link the
//!    event waits for the user (`WAITING`), never for the catalog key.
//! 3. A receipt for the fingerprint means it is done: no upstream call.
//! 4. The slot is reserved (within the budget, else `REVIEW`).
//! 5. A read-back comes first when an earlier write may have landed (the
//!    slot was sent: a timeout, a reset, a 5xx, a crash) or when the action
//!    depends on the entry (want-to-read never demotes a title being read;
//!    a removal must find a bare entry). If it already shows the value,
//!    the event is confirmed without sending.
//! 6. The slot is marked sent, durably, then the write goes out.
//! 7. Only a read-back showing the value confirms (Kavita answers `true`
//!    even when it stored nothing).
//!
//! Anything else waits and tries again (a cooldown until its deadline,
//! other trouble with backoff): never a permanent failure.

use std::time::Duration;

use chrono::Utc;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    action::{Action, ActionKind, RemoteEntry, backoff, shows},
    events::{DELIVER_KIND, EventStatus, EventView, Events, Slot},
    links::{LinkStatus, Links},
    provider::{Personal, ProviderError},
    service::Providers,
};
use crate::{
    error::AppResult,
    jobs::{
        handler::{SingleStage, StageError, StageRun},
        model::Queue,
    },
};

/// How long a later event for the same title waits before looking again.
const WAIT_IN_LINE: Duration = Duration::from_millis(500);

pub struct DeliverHandler {
    pub events: Events,
    pub providers: Providers,
    pub links: Links,
}

#[derive(Deserialize)]
pub struct DeliverPayload {
    event: Uuid,
}

/// What became of one delivery attempt.
enum Outcome {
    Confirmed(EventView),
    /// Still pending: try again after this long.
    Retry {
        after: Duration,
        reason: String,
        failed: bool,
    },
    /// Waiting for the user or an operator.
    Park(EventStatus, String),
}

#[async_trait::async_trait]
impl SingleStage for DeliverHandler {
    const KIND: &'static str = DELIVER_KIND;
    const QUEUE: Queue = Queue::Short;
    const STAGE: &'static str = "deliver";
    type Payload = DeliverPayload;

    async fn run(
        &self,
        payload: DeliverPayload,
        run: &mut StageRun<'_>,
    ) -> Result<Value, StageError> {
        let Some(event) = self.events.get(payload.event).await? else {
            return Ok(json!({ "status": "GONE" }));
        };
        if event.status != EventStatus::Pending || event.task_id != Some(run.task.id) {
            // Finished, parked, or handed to a newer delivery task.
            return Ok(json!({ "status": event.status.as_str() }));
        }
        if !self.events.is_first_in_line(&event).await? {
            return Err(StageError::Defer(WAIT_IN_LINE));
        }
        let outcome = match self.deliver(&event).await {
            Ok(outcome) => outcome,
            Err(error) => Outcome::Retry {
                after: backoff(event.attempts),
                reason: format!("will try again: {error}"),
                failed: true,
            },
        };
        match outcome {
            Outcome::Confirmed(view) => Ok(json!({ "status": view.status.as_str() })),
            Outcome::Park(status, reason) => {
                tracing::info!(event = %event.id, status = status.as_str(), %reason, "gateway event parked");
                self.events
                    .set_status(&event, status, Some(reason.clone()), 0)
                    .await?;
                Ok(json!({ "status": status.as_str(), "reason": reason }))
            }
            Outcome::Retry {
                after,
                reason,
                failed,
            } => {
                tracing::info!(event = %event.id, wait = ?after, %reason, "gateway event waits");
                self.events
                    .set_status(
                        &event,
                        EventStatus::Pending,
                        Some(reason),
                        i32::from(failed),
                    )
                    .await?;
                Err(StageError::Defer(after))
            }
        }
    }
}

impl DeliverHandler {
    async fn deliver(&self, event: &EventView) -> AppResult<Outcome> {
        let action = event.action()?;
        let name = event.provider.display();
        let Some((link, credential)) = self.links.get(event.user_id, event.provider).await? else {
            return Ok(Outcome::Park(
                EventStatus::Waiting,
                format!("link a {name} account to deliver it"),
            ));
        };
        if link.status == LinkStatus::NeedsRelink {
            return Ok(Outcome::Park(
                EventStatus::Waiting,
                format!("{name} refused the linked credential: link the account again"),
            ));
        }
        if self.events.receipt(&event.fingerprint).await?.is_some() {
            let view = self
                .events
                .confirm(
                    event,
                    &event.fingerprint,
                    &action,
                    &RemoteEntry::default(),
                    false,
                )
                .await?;
            return Ok(Outcome::Confirmed(view));
        }
        let sent = match self.events.reserve(event, &event.fingerprint).await? {
            Slot::Fresh => false,
            Slot::Sent => true,
            Slot::Refused => {
                return Ok(Outcome::Park(
                    EventStatus::Review,
                    "the receipt budget is full: an operator must review it".into(),
                ));
            }
        };
        let who = Personal {
            credential: credential.expose_secret(),
            remote_user_id: link.remote_user_id.as_deref(),
        };
        let attempt = Attempt {
            handler: self,
            event,
            action: &action,
            who: &who,
        };
        Ok(match attempt.run(sent).await {
            Ok(outcome) => outcome,
            Err(error) => self.after_error(event, error, sent).await?,
        })
    }

    /// What a provider's refusal or trouble means for the event.
    async fn after_error(
        &self,
        event: &EventView,
        error: ProviderError,
        sent: bool,
    ) -> AppResult<Outcome> {
        let name = event.provider.display();
        Ok(match error {
            ProviderError::CredentialRefused(_) => {
                self.links
                    .mark(event.user_id, event.provider, LinkStatus::NeedsRelink)
                    .await?;
                Outcome::Park(
                    EventStatus::Waiting,
                    format!("{name} refused the linked credential: link the account again"),
                )
            }
            ProviderError::Cooldown { host, until } => Outcome::Retry {
                after: (until - Utc::now())
                    .to_std()
                    .unwrap_or(Duration::from_secs(1))
                    .max(Duration::from_secs(1)),
                reason: format!("{host} asked us to wait until {until}"),
                failed: false,
            },
            ProviderError::NotFound(_) => {
                if !sent {
                    self.events.release(&event.fingerprint).await?;
                }
                Outcome::Park(
                    EventStatus::Review,
                    format!("{name} has no title {} for this account", event.title_id),
                )
            }
            ProviderError::NotConfigured(_)
            | ProviderError::Unsupported(_)
            | ProviderError::Inapplicable(_) => {
                if !sent {
                    self.events.release(&event.fingerprint).await?;
                }
                Outcome::Park(EventStatus::Review, error.to_string())
            }
            ProviderError::Unreachable { .. } | ProviderError::Unexpected { .. } => {
                Outcome::Retry {
                    after: backoff(event.attempts),
                    reason: format!(
                        "{error}; the outcome is verified by a read-back before anything is sent again"
                    ),
                    failed: true,
                }
            }
        })
    }
}

/// One delivery attempt with the user's credential.
struct Attempt<'a> {
    handler: &'a DeliverHandler,
    event: &'a EventView,
    action: &'a Action,
    who: &'a Personal<'a>,
}

impl Attempt<'_> {
    async fn run(&self, sent: bool) -> Result<Outcome, ProviderError> {
        let provider = self.handler.providers.get(self.event.provider);
        let title = self.event.title_id.as_str();
        let kind = self.action.kind();
        let mut entry = RemoteEntry::default();
        if sent || matches!(kind, ActionKind::WantToRead | ActionKind::Removal) {
            entry = provider.read_entry(self.who, title, kind).await?;
            if shows(self.action, &entry) {
                return self.confirm(&entry, sent).await;
            }
            if kind == ActionKind::Removal
                && let Err(reason) = provider.removal_precondition(&entry)
            {
                if !sent {
                    self.handler
                        .events
                        .release(&self.event.fingerprint)
                        .await
                        .map_err(store_error)?;
                }
                return Ok(Outcome::Park(
                    EventStatus::Review,
                    format!("not removed, nothing was deleted: {reason}"),
                ));
            }
        }
        self.handler
            .events
            .mark_sent(&self.event.fingerprint)
            .await
            .map_err(store_error)?;
        provider.write(self.who, title, self.action, &entry).await?;
        let after = provider.read_entry(self.who, title, kind).await?;
        if shows(self.action, &after) {
            return self.confirm(&after, true).await;
        }
        Ok(Outcome::Retry {
            after: backoff(self.event.attempts),
            reason: format!(
                "{} accepted the write but a read-back does not show it",
                self.event.provider.display()
            ),
            failed: true,
        })
    }

    async fn confirm(&self, entry: &RemoteEntry, sent: bool) -> Result<Outcome, ProviderError> {
        self.handler
            .events
            .confirm(
                self.event,
                &self.event.fingerprint,
                self.action,
                entry,
                sent,
            )
            .await
            .map(Outcome::Confirmed)
            .map_err(store_error)
    }
}

/// Our own storage failing mid-attempt: retried like an unreachable
/// provider (the slot says whether a write went out).
fn store_error(error: crate::error::AppError) -> ProviderError {
    ProviderError::Unexpected {
        provider: "the gateway's store",
        what: error.to_string(),
    }
}
