//! `gateway.scrobble`: what Kavita's paid relay does, without it. For each
//! user with a linked Kavita and a linked AniList account (or one user, when
//! they ask), read their Kavita library with their own key — chapters read,
//! ratings, Want to Read — for series linked to an AniList media, compare
//! with what was last admitted, and admit one event per change (delivered
//! and confirmed like any other, `super::delivery`).
//!
//! Series ↔ media: a series whose metadata web links name an AniList id is
//! linked (`CONFIRMED`); otherwise a cached AniList title search proposes
//! one (`PROPOSED`) for the user to confirm (`confirmTitleLink`) or set
//! (`setTitleLink`). Proposed links are not scrobbled.

use std::sync::{Arc, OnceLock};

use chrono::Utc;
use entity::{gateway_link, gateway_scrobble_mark, gateway_title_link};
use sea_orm::{
    ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set, sea_query::OnConflict,
};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    action::ActionKind,
    links::LinkStatus,
    provider::{MetadataKind, ProviderKind},
    scrobble::{self, Marks, Reading},
    service::GatewayService,
};
use crate::{
    db,
    error::{AppError, AppResult},
    jobs::{
        handler::{SingleStage, StageError, StageRun},
        model::{NewTask, Queue},
    },
};

pub const KIND: &str = "gateway.scrobble";

/// A title link's state.
#[derive(async_graphql::Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum TitleLinkState {
    /// Scrobbled: from the series' web links, or set or confirmed by the user.
    Confirmed,
    /// Found by a title search; waits for the user (`confirmTitleLink`,
    /// `setTitleLink`).
    Proposed,
}

impl TitleLinkState {
    pub fn as_str(self) -> &'static str {
        match self {
            TitleLinkState::Confirmed => "CONFIRMED",
            TitleLinkState::Proposed => "PROPOSED",
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Payload {
    /// One user; every linked user when absent (the periodic run).
    #[serde(default)]
    pub user: Option<Uuid>,
}

/// The periodic run's task.
pub fn periodic_task() -> NewTask {
    NewTask::new(KIND, Queue::Medium, json!({}))
}

/// One user's run, on request.
pub fn user_task(user: Uuid) -> NewTask {
    let mut task = NewTask::new(KIND, Queue::Medium, json!({ "user": user }));
    task.owner_id = Some(user);
    task
}

/// What one user's run did.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub series_read: usize,
    pub linked: usize,
    pub proposed: usize,
    pub events: usize,
}

/// The task handler. It is registered before the service exists (the
/// service needs the runner), so it reaches the service through a cell
/// the gateway fills once the runner is built.
pub struct ScrobbleHandler {
    pub service: Arc<OnceLock<GatewayService>>,
}

#[async_trait::async_trait]
impl SingleStage for ScrobbleHandler {
    const KIND: &'static str = KIND;
    const QUEUE: Queue = Queue::Medium;
    const STAGE: &'static str = "scrobble";
    type Payload = Payload;

    async fn run(&self, payload: Payload, _run: &mut StageRun<'_>) -> Result<Value, StageError> {
        let service = self
            .service
            .get()
            .ok_or_else(|| StageError::Retry(anyhow::anyhow!("the gateway is starting")))?;
        let users = match payload.user {
            Some(user) => vec![user],
            None => service.scrobbling_users().await?,
        };
        let mut total = Summary::default();
        let mut failed = Vec::new();
        for user in users {
            match service.scrobble(user).await {
                Ok(summary) => {
                    total.series_read += summary.series_read;
                    total.linked += summary.linked;
                    total.proposed += summary.proposed;
                    total.events += summary.events;
                }
                Err(error) => {
                    tracing::warn!(%user, %error, "scrobbling a user failed");
                    failed.push(json!({ "user": user, "error": error.to_string() }));
                }
            }
        }
        if payload.user.is_some()
            && let Some(failure) = failed.first()
        {
            return Err(StageError::Retry(anyhow::anyhow!(
                "{}",
                failure["error"].as_str().unwrap_or("scrobbling failed")
            )));
        }
        let mut result =
            serde_json::to_value(total).map_err(|e| StageError::Fail(e.to_string()))?;
        result["failed"] = Value::Array(failed);
        Ok(result)
    }
}

impl GatewayService {
    /// Users with both a linked Kavita and a linked AniList account.
    pub async fn scrobbling_users(&self) -> AppResult<Vec<Uuid>> {
        let rows: Vec<(Uuid, String)> = gateway_link::Entity::find()
            .filter(gateway_link::Column::Status.eq("LINKED"))
            .select_only()
            .column(gateway_link::Column::UserId)
            .column(gateway_link::Column::Provider)
            .into_tuple()
            .all(self.db())
            .await?;
        let has = |user: Uuid, provider: ProviderKind| {
            rows.iter()
                .any(|(u, p)| *u == user && p == provider.as_str())
        };
        let mut users: Vec<Uuid> = rows
            .iter()
            .map(|(user, _)| *user)
            .filter(|user| has(*user, ProviderKind::Kavita) && has(*user, ProviderKind::Anilist))
            .collect();
        users.sort();
        users.dedup();
        Ok(users)
    }

    /// Scrobbles one user's Kavita reading to AniList.
    pub async fn scrobble(&self, user: Uuid) -> AppResult<Summary> {
        let links = self.link_store();
        let Some((kavita_link, key)) = links.get(user, ProviderKind::Kavita).await? else {
            return Ok(Summary::default());
        };
        let anilist = links.get(user, ProviderKind::Anilist).await?;
        if kavita_link.status != LinkStatus::Linked
            || anilist
                .as_ref()
                .is_none_or(|(link, _)| link.status != LinkStatus::Linked)
        {
            return Ok(Summary::default());
        }
        let kavita = self.kavita();
        let key = key.expose_secret();
        let library = kavita.series(key, false).await?;
        let wanted: std::collections::HashSet<u32> = kavita
            .series(key, true)
            .await?
            .into_iter()
            .map(|series| series.id)
            .collect();
        let mut summary = Summary::default();
        for series in library {
            let want_to_read = wanted.contains(&series.id);
            if series.pages_read == 0 && series.user_rating <= 0.0 && !want_to_read {
                continue;
            }
            summary.series_read += 1;
            let Some(media) = self.media_for(user, key, &series, &mut summary).await? else {
                continue;
            };
            let chapters = if series.pages_read > 0 {
                scrobble::chapters_read(&kavita.volumes(key, series.id).await?)
            } else {
                0
            };
            let reading = Reading {
                chapters,
                stars: series.user_rating,
                want_to_read,
            };
            let marks = self.marks(user, &media).await?;
            for action in scrobble::plan(&reading, &marks) {
                self.admit_scrobbled(user, &media, action).await?;
                summary.events += 1;
            }
        }
        Ok(summary)
    }

    /// The confirmed AniList media of a series, linking it first if it
    /// has no link yet (from its web links, else proposed by a search).
    async fn media_for(
        &self,
        user: Uuid,
        key: &str,
        series: &super::kavita::SeriesSummary,
        summary: &mut Summary,
    ) -> AppResult<Option<String>> {
        let series_id = series.id.to_string();
        if let Some(link) = gateway_title_link::Entity::find_by_id((user, series_id.clone()))
            .one(self.db())
            .await?
        {
            return Ok((link.state == TitleLinkState::Confirmed.as_str())
                .then_some(link.media_id)
                .flatten());
        }
        let (media, title, state, source) = match self.kavita().anilist_link(key, series.id).await?
        {
            Some(media) => (
                Some(media.to_string()),
                None,
                TitleLinkState::Confirmed,
                "WEB_LINK",
            ),
            None => {
                let (media, title) = self.search_media(&series.name).await;
                (media, title, TitleLinkState::Proposed, "SEARCH")
            }
        };
        match state {
            TitleLinkState::Confirmed => summary.linked += 1,
            TitleLinkState::Proposed => summary.proposed += 1,
        }
        self.save_title_link(
            user,
            &series_id,
            &series.name,
            media.clone(),
            title,
            state,
            source,
        )
        .await?;
        Ok((state == TitleLinkState::Confirmed)
            .then_some(media)
            .flatten())
    }

    /// The first AniList manga a public title search finds (cached), and
    /// its title; nothing when the search fails or finds nothing.
    async fn search_media(&self, name: &str) -> (Option<String>, Option<String>) {
        let name = name.trim();
        if name.is_empty() {
            return (None, None);
        }
        let query: String = name.chars().take(200).collect();
        let Ok(found) = self
            .metadata(
                ProviderKind::Anilist,
                MetadataKind::Search,
                None,
                Some(&query),
            )
            .await
        else {
            return (None, None);
        };
        let payload: Value = serde_json::from_str(&found.payload).unwrap_or(Value::Null);
        let first = &payload["Page"]["media"][0];
        (
            first["id"].as_i64().map(|id| id.to_string()),
            media_title(first),
        )
    }

    #[allow(clippy::too_many_arguments)]
    async fn save_title_link(
        &self,
        user: Uuid,
        series_id: &str,
        series_name: &str,
        media: Option<String>,
        media_title: Option<String>,
        state: TitleLinkState,
        source: &str,
    ) -> AppResult<gateway_title_link::Model> {
        let row = gateway_title_link::ActiveModel {
            user_id: Set(user),
            series_id: Set(series_id.to_owned()),
            series_name: Set(series_name.chars().take(500).collect()),
            media_id: Set(media),
            media_title: Set(media_title),
            state: Set(state.as_str().to_owned()),
            source: Set(source.to_owned()),
            updated_at: Set(Utc::now()),
        };
        let txn = db::begin_write(self.db()).await?;
        gateway_title_link::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([
                    gateway_title_link::Column::UserId,
                    gateway_title_link::Column::SeriesId,
                ])
                .update_columns([
                    gateway_title_link::Column::MediaId,
                    gateway_title_link::Column::MediaTitle,
                    gateway_title_link::Column::State,
                    gateway_title_link::Column::Source,
                    gateway_title_link::Column::UpdatedAt,
                ])
                .to_owned(),
            )
            .exec_without_returning(&*txn)
            .await?;
        txn.commit().await?;
        gateway_title_link::Entity::find_by_id((user, series_id.to_owned()))
            .one(self.db())
            .await?
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("a saved title link is missing")))
    }

    /// What the scrobbler last admitted for the user's media.
    async fn marks(&self, user: Uuid, media: &str) -> AppResult<Marks> {
        let rows = gateway_scrobble_mark::Entity::find()
            .filter(gateway_scrobble_mark::Column::UserId.eq(user))
            .filter(gateway_scrobble_mark::Column::MediaId.eq(media))
            .all(self.db())
            .await?;
        let mut marks = Marks::default();
        for row in rows {
            let value: Value = serde_json::from_str(&row.value).unwrap_or(Value::Null);
            match ActionKind::parse(&row.action) {
                Some(ActionKind::Progress) => {
                    marks.chapters = value["chapters"]
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok());
                }
                Some(ActionKind::Rating) => marks.stars = value["stars"].as_f64(),
                Some(ActionKind::WantToRead) => marks.want_to_read = true,
                _ => {}
            }
        }
        Ok(marks)
    }

    /// The viewer's title links, optionally of one state.
    pub async fn title_links(
        &self,
        user: Uuid,
        state: Option<TitleLinkState>,
    ) -> AppResult<Vec<gateway_title_link::Model>> {
        let mut select =
            gateway_title_link::Entity::find().filter(gateway_title_link::Column::UserId.eq(user));
        if let Some(state) = state {
            select = select.filter(gateway_title_link::Column::State.eq(state.as_str()));
        }
        Ok(select
            .order_by_asc(gateway_title_link::Column::SeriesName)
            .order_by_asc(gateway_title_link::Column::SeriesId)
            .limit(MAX_TITLE_LINKS)
            .all(self.db())
            .await?)
    }

    /// Confirms a proposed link.
    pub async fn confirm_title_link(
        &self,
        user: Uuid,
        series_id: &str,
    ) -> AppResult<gateway_title_link::Model> {
        let link = gateway_title_link::Entity::find_by_id((user, series_id.trim().to_owned()))
            .one(self.db())
            .await?
            .ok_or(AppError::NotFound("title link"))?;
        let Some(media) = link.media_id.clone() else {
            return Err(AppError::bad_input(
                "seriesId",
                "nothing was proposed for this series: name the media with setTitleLink",
            ));
        };
        let source = link.source.clone();
        self.save_title_link(
            user,
            &link.series_id,
            &link.series_name,
            Some(media),
            link.media_title,
            TitleLinkState::Confirmed,
            &source,
        )
        .await
    }

    /// Links a series to an AniList media the user names (checked with
    /// AniList's public catalog).
    pub async fn set_title_link(
        &self,
        user: Uuid,
        series_id: &str,
        media_id: &str,
    ) -> AppResult<gateway_title_link::Model> {
        let series_id = series_id.trim();
        if series_id.parse::<u32>().is_err() {
            return Err(AppError::bad_input(
                "seriesId",
                "a Kavita series id is a number",
            ));
        }
        let media_id = media_id.trim();
        if media_id.parse::<u32>().is_err() {
            return Err(AppError::bad_input(
                "mediaId",
                "an AniList media id is a number",
            ));
        }
        let found = match self
            .metadata(
                ProviderKind::Anilist,
                MetadataKind::Title,
                Some(media_id),
                None,
            )
            .await
        {
            Ok(found) => found,
            Err(AppError::NotFound(_)) => {
                return Err(AppError::bad_input("mediaId", "AniList has no such media"));
            }
            Err(error) => return Err(error),
        };
        let payload: Value = serde_json::from_str(&found.payload).unwrap_or(Value::Null);
        let name = gateway_title_link::Entity::find_by_id((user, series_id.to_owned()))
            .one(self.db())
            .await?
            .map(|link| link.series_name)
            .unwrap_or_default();
        self.save_title_link(
            user,
            series_id,
            &name,
            Some(media_id.to_owned()),
            media_title(&payload["Media"]),
            TitleLinkState::Confirmed,
            "USER",
        )
        .await
    }
}

/// The most title links one answer lists.
const MAX_TITLE_LINKS: u64 = 1_000;

/// A media's display title (English, else romaji, else native).
fn media_title(media: &Value) -> Option<String> {
    ["english", "romaji", "native"]
        .iter()
        .find_map(|field| media["title"][field].as_str())
        .map(str::to_owned)
}
