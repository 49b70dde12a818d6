//! OIDC login's state changes: starting an authorization (login or link),
//! finishing it at the callback, and unlinking.

use std::{net::IpAddr, num::NonZeroU32, sync::Arc};

use chrono::{DateTime, TimeDelta, Utc};
use entity::{oidc_identity, oidc_login_state, user};
use governor::{
    DefaultKeyedRateLimiter, Quota, RateLimiter,
    clock::{Clock, DefaultClock},
};
use openidconnect::{
    AuthorizationCode, CsrfToken, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    core::{CoreAuthenticationFlow, CoreClient},
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    Set, SqlErr, sea_query::Expr,
};
use uuid::Uuid;

use super::{
    provider::{Provider, ProviderError, VerifiedIdentity},
    rules,
    settings::OidcConfig,
};
use crate::{
    auth::{
        Role, Viewer,
        keys::ServerSecret,
        password::NO_PASSWORD,
        ratelimit::Realm,
        service::{AuthService, IssuedTokens},
        tokens::{random_token, token_hash},
    },
    db,
    domain::PublicUrl,
    error::{AppError, AppResult},
    http::client::RequestMeta,
};

/// How long a started authorization may be finished.
pub const STATE_TTL: TimeDelta = TimeDelta::minutes(10);

/// Authorizations one address (a login) or one account (a link) may start
/// per minute, all at once if it likes; beyond that `RATE_LIMITED`. A
/// person signing in starts one; thirty covers reloads, a second tab and a
/// household or office behind one address.
pub const STARTS_PER_MINUTE: u32 = 30;

/// Unfinished authorizations kept at most, everyone's together. Each is a
/// row until it is finished or expires ([`STATE_TTL`]); when this many are
/// pending a new start is refused (`RATE_LIMITED`) until some go, so a
/// flood from many addresses costs a bounded table, not an unbounded one.
pub const MAX_PENDING: u64 = 10_000;

/// Budget keys the start limiter remembers before it forgets the idle ones.
const TRACKED_START_KEYS: usize = 10_000;

/// Why the browser was sent to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Sign in (or create an account).
    Login,
    /// Attach the identity to this signed-in account.
    Link(Uuid),
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Purpose::Login => "login",
            Purpose::Link(_) => "link",
        }
    }
}

/// A started authorization: where to send the browser, and the state it
/// carries (the login's browser is bound to it by a cookie).
pub struct Started {
    pub authorize_url: url::Url,
    pub state: String,
    pub expires_at: DateTime<Utc>,
}

/// How a callback ended.
pub enum Finished {
    /// A session was opened; send the browser to `return_to`.
    LoggedIn {
        issued: Box<IssuedTokens>,
        return_to: String,
    },
    /// The identity now signs in as the viewer.
    Linked,
}

/// What the login page offers.
pub struct Offered {
    pub password: bool,
    /// The provider's display name and start URL, when configured.
    pub oidc: Option<(String, String)>,
}

#[derive(Clone)]
pub struct OidcService {
    inner: Option<Arc<Inner>>,
    auth: Arc<AuthService>,
}

struct Inner {
    provider: Provider,
    db: DatabaseConnection,
    secret: Arc<ServerSecret>,
    public_url: PublicUrl,
    starts: DefaultKeyedRateLimiter<rules::StartKey>,
}

const NOT_CONFIGURED: AppError =
    AppError::NotFound("OIDC login (TRELLIS_OIDC_ISSUER is not configured)");

fn upstream(error: ProviderError) -> AppError {
    AppError::Upstream(format!(
        "the identity provider could not be reached: {error}"
    ))
}

impl OidcService {
    pub fn new(
        config: Option<OidcConfig>,
        auth: Arc<AuthService>,
        db: DatabaseConnection,
        secret: Arc<ServerSecret>,
        public_url: PublicUrl,
    ) -> anyhow::Result<Self> {
        let inner = match config {
            Some(config) => Some(Arc::new(Inner {
                provider: Provider::new(config)?,
                db,
                secret,
                public_url,
                starts: RateLimiter::keyed(Quota::per_minute(
                    NonZeroU32::new(STARTS_PER_MINUTE).expect("a positive budget"),
                )),
            })),
            None => None,
        };
        Ok(OidcService { inner, auth })
    }

    fn inner(&self) -> AppResult<&Inner> {
        self.inner.as_deref().ok_or(NOT_CONFIGURED)
    }

    /// What the login page offers.
    pub fn offered(&self) -> Offered {
        Offered {
            password: self.auth.password_login_enabled(),
            oidc: self.inner.as_ref().map(|inner| {
                let start = inner
                    .public_url
                    .join(super::START_PATH)
                    .map_or_else(|| super::START_PATH.to_owned(), |url| url.to_string());
                (inner.provider.config().display_name.clone(), start)
            }),
        }
    }

    /// Starts an authorization: stores the transaction (state hash, nonce,
    /// sealed PKCE verifier, purpose) and returns the provider's authorize
    /// URL with PKCE S256, `state` and `nonce`. Bounded: at most
    /// [`STARTS_PER_MINUTE`] per address (login) or account (link), at
    /// most [`MAX_PENDING`] unfinished in all; beyond either,
    /// `RATE_LIMITED` and nothing is stored.
    pub async fn start(
        &self,
        purpose: Purpose,
        return_to: Option<&str>,
        client_ip: IpAddr,
    ) -> AppResult<Started> {
        let inner = self.inner()?;
        inner.admit_start(purpose, client_ip)?;
        let metadata = inner.provider.metadata().await.map_err(upstream)?;
        let redirect = inner.redirect_url()?;
        let client = CoreClient::from_provider_metadata(
            (*metadata).clone(),
            inner.provider.client_id(),
            inner.provider.client_secret(),
        )
        .set_redirect_uri(redirect);
        let state = random_token("st");
        let nonce = random_token("nc");
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (sent_state, sent_nonce) = (state.clone(), nonce.clone());
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(sent_state),
                move || Nonce::new(sent_nonce),
            )
            .set_pkce_challenge(challenge);
        for scope in inner.provider.config().scopes.iter().skip(1) {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (authorize_url, _, _) = request.url();

        let now = Utc::now();
        let txn = db::begin_write(&inner.db).await?;
        // Abandoned authorizations go as new ones come.
        oidc_login_state::Entity::delete_many()
            .filter(oidc_login_state::Column::CreatedAt.lte(now - STATE_TTL))
            .exec(&*txn)
            .await?;
        let pending = oidc_login_state::Entity::find().count(&*txn).await?;
        if pending >= MAX_PENDING {
            tracing::warn!(pending, "OIDC start refused: too many unfinished sign-ins");
            return Err(AppError::RateLimited { retry_after: 60 });
        }
        oidc_login_state::ActiveModel {
            state_hash: Set(token_hash(&state)),
            nonce: Set(nonce),
            pkce_verifier: Set(inner
                .secret
                .seal(&pkce_label(&state), verifier.secret().as_bytes())),
            purpose: Set(purpose.as_str().to_owned()),
            user_id: Set(match purpose {
                Purpose::Login => None,
                Purpose::Link(user) => Some(user),
            }),
            return_to: Set(return_to.and_then(rules::safe_return_to)),
            created_at: Set(now),
        }
        .insert(&*txn)
        .await?;
        txn.commit().await?;
        Ok(Started {
            authorize_url,
            state,
            expires_at: now + STATE_TTL,
        })
    }

    /// Spends `state` without finishing (the provider answered an error).
    pub async fn abandon(&self, state: &str) -> AppResult<()> {
        let inner = self.inner()?;
        inner.consume(state).await.map(|_| ())
    }

    /// Finishes an authorization at the callback: consumes the state
    /// (unknown, used or expired: `BAD_USER_INPUT`, nothing changes),
    /// trades the code (with the PKCE verifier and the client secret) for
    /// tokens, verifies the id_token, then signs in or links.
    ///
    /// `browser_state` is the state cookie set by `/auth/oidc/start` (a
    /// login must come back to the browser that started it); `viewer` is
    /// the signed-in caller (a link must come back to its own account).
    /// Refused id_tokens count as failed logins of the caller's address.
    pub async fn finish(
        &self,
        state: &str,
        code: &str,
        browser_state: Option<&str>,
        viewer: Option<&Viewer>,
        meta: &RequestMeta,
    ) -> AppResult<Finished> {
        let inner = self.inner()?;
        let row = inner.consume(state).await?;
        let purpose = match (row.purpose.as_str(), row.user_id) {
            ("link", Some(user)) => Purpose::Link(user),
            _ => Purpose::Login,
        };
        match purpose {
            Purpose::Login if browser_state != Some(state) => {
                return Err(AppError::bad_input(
                    "state",
                    "this login was started in another browser; start it again here",
                ));
            }
            Purpose::Link(user) if viewer.map(|v| v.user_id) != Some(user) => {
                return Err(AppError::Forbidden(
                    "this link was started by another account; sign in as it and link again",
                ));
            }
            _ => {}
        }
        let verifier = inner
            .secret
            .open(&pkce_label(state), &row.pkce_verifier)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("a PKCE verifier does not open")))?;

        let mut refused = None;
        let identity = self
            .auth
            .throttled(Realm::Oidc, None, meta, async {
                match inner
                    .exchange(code, PkceCodeVerifier::new(verifier), &row.nonce)
                    .await?
                {
                    Ok(identity) => Ok(Some(identity)),
                    Err(message) => {
                        refused = Some(message);
                        Ok(None)
                    }
                }
            })
            .await?;
        let Some(identity) = identity else {
            return Err(AppError::Unauthenticated(
                refused.unwrap_or("the id_token does not verify"),
            ));
        };

        match purpose {
            Purpose::Link(user) => {
                inner.link(user, &identity).await?;
                Ok(Finished::Linked)
            }
            Purpose::Login => {
                let user = inner.account_for(&identity).await?;
                let issued = self.auth.open_session(user, meta).await?;
                Ok(Finished::LoggedIn {
                    issued: Box::new(issued),
                    return_to: row.return_to.unwrap_or_else(|| "/".to_owned()),
                })
            }
        }
    }

    /// Removes the viewer's identity at the configured issuer. Refused
    /// when it is the account's only way in: the account has no password
    /// (it was created by an OIDC login), or password login is disabled.
    pub async fn unlink(&self, viewer: &Viewer) -> AppResult<bool> {
        let inner = self.inner()?;
        let account = self
            .auth
            .user(viewer.user_id)
            .await?
            .ok_or(AppError::Unauthenticated("account no longer exists"))?;
        let linked = oidc_identity::Entity::find()
            .filter(oidc_identity::Column::UserId.eq(viewer.user_id))
            .filter(oidc_identity::Column::Issuer.eq(&inner.provider.config().issuer))
            .count(&inner.db)
            .await?;
        if linked == 0 {
            return Ok(false);
        }
        if !self.auth.password_login_enabled() || account.password_hash == NO_PASSWORD {
            return Err(AppError::Forbidden(
                "unlinking would leave this account without a way to sign in \
                 (it has no password, or password login is disabled)",
            ));
        }
        let txn = db::begin_write(&inner.db).await?;
        let deleted = oidc_identity::Entity::delete_many()
            .filter(oidc_identity::Column::UserId.eq(viewer.user_id))
            .filter(oidc_identity::Column::Issuer.eq(&inner.provider.config().issuer))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        tracing::info!(user_id = %viewer.user_id, "OIDC identity unlinked");
        Ok(deleted.rows_affected > 0)
    }
}

impl Inner {
    /// Spends one start from the caller's budget (see [`STARTS_PER_MINUTE`]).
    fn admit_start(&self, purpose: Purpose, client_ip: IpAddr) -> AppResult<()> {
        let link_for = match purpose {
            Purpose::Login => None,
            Purpose::Link(user) => Some(user),
        };
        let key = rules::start_key(link_for, client_ip);
        let admitted = self.starts.check_key(&key);
        if self.starts.len() > TRACKED_START_KEYS {
            self.starts.retain_recent();
        }
        admitted.map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            tracing::info!(?key, "OIDC start refused: budget spent");
            AppError::RateLimited {
                retry_after: wait.as_secs().max(1),
            }
        })
    }

    fn redirect_url(&self) -> AppResult<RedirectUrl> {
        let url = self
            .provider
            .config()
            .redirect_url(&self.public_url)
            .ok_or_else(|| {
                AppError::internal(anyhow::anyhow!(
                    "no redirect URL: set TRELLIS_OIDC_REDIRECT_URL or TRELLIS_PUBLIC_URL"
                ))
            })?;
        Ok(RedirectUrl::from_url(url))
    }

    /// Deletes the transaction of `state` whatever happens next; refuses
    /// an unknown (never issued, or already used) or expired one.
    async fn consume(&self, state: &str) -> AppResult<oidc_login_state::Model> {
        let hash = token_hash(state);
        let txn = db::begin_write(&self.db).await?;
        let row = oidc_login_state::Entity::find_by_id(hash.clone())
            .one(&*txn)
            .await?;
        if row.is_some() {
            oidc_login_state::Entity::delete_by_id(hash)
                .exec(&*txn)
                .await?;
        }
        txn.commit().await?;
        let Some(row) = row else {
            return Err(AppError::bad_input(
                "state",
                "this sign-in is unknown or was already used; start again",
            ));
        };
        if row.created_at + STATE_TTL <= Utc::now() {
            return Err(AppError::bad_input(
                "state",
                "this sign-in took longer than ten minutes; start again",
            ));
        }
        Ok(row)
    }

    /// Trades the code for tokens and verifies the id_token: the identity,
    /// or why the id_token was refused.
    async fn exchange(
        &self,
        code: &str,
        verifier: PkceCodeVerifier,
        nonce: &str,
    ) -> AppResult<Result<VerifiedIdentity, &'static str>> {
        use openidconnect::TokenResponse;
        let metadata = self.provider.metadata().await.map_err(upstream)?;
        let client = CoreClient::from_provider_metadata(
            (*metadata).clone(),
            self.provider.client_id(),
            self.provider.client_secret(),
        )
        .set_redirect_uri(self.redirect_url()?);
        let request = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|error| {
                AppError::Upstream(format!(
                    "the identity provider has no token endpoint: {error}"
                ))
            })?
            .set_pkce_verifier(verifier);
        let tokens = request
            .request_async(self.provider.http())
            .await
            .map_err(|error| {
                AppError::Upstream(format!(
                    "the identity provider refused the code: {}",
                    crate::error::chain(&error)
                ))
            })?;
        let Some(id_token) = tokens.id_token() else {
            return Ok(Err("the identity provider answered without an id_token"));
        };
        let verified = self
            .provider
            .verify(metadata, id_token, &Nonce::new(nonce.to_owned()))
            .await
            .map_err(upstream)?;
        Ok(verified.map_err(|refusal| refusal.message()))
    }

    /// The account an identity signs in as: the linked one (its role kept
    /// in step with the admin group when one is configured), else a new
    /// MEMBER (or ADMIN by group) when auto-creation is on.
    async fn account_for(&self, identity: &VerifiedIdentity) -> AppResult<user::Model> {
        let config = self.provider.config();
        let role = rules::role_from_groups(&identity.claims, config.admin_group.as_deref());
        let linked =
            oidc_identity::Entity::find_by_id((identity.issuer.clone(), identity.subject.clone()))
                .find_also_related(user::Entity)
                .one(&self.db)
                .await?;
        if let Some((_, Some(account))) = linked {
            return match role {
                Some(role) if role != account.role => self.set_role(account, role).await,
                _ => Ok(account),
            };
        }
        if !config.auto_create {
            return Err(AppError::Forbidden(
                "no account is linked to this identity, and accounts are not created \
                 on first sign-in here (TRELLIS_OIDC_AUTO_CREATE=false)",
            ));
        }
        self.create_account(identity, role.unwrap_or(Role::Member))
            .await
    }

    async fn set_role(&self, account: user::Model, role: Role) -> AppResult<user::Model> {
        let txn = db::begin_write(&self.db).await?;
        user::Entity::update_many()
            .col_expr(user::Column::Role, Expr::value(role))
            .col_expr(user::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(user::Column::Id.eq(account.id))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        tracing::info!(user_id = %account.id, role = ?role, "role set from the OIDC admin group");
        Ok(user::Model { role, ..account })
    }

    /// A new account for the identity, named from its username claim (made
    /// unique with a suffix: never an existing account), linked to it.
    async fn create_account(
        &self,
        identity: &VerifiedIdentity,
        role: Role,
    ) -> AppResult<user::Model> {
        let base = rules::base_username(&identity.claims, &self.provider.config().username_claim);
        let now = Utc::now();
        let txn = db::begin_write(&self.db).await?;
        let mut username = None;
        for attempt in 1..=100 {
            let candidate = rules::candidate_username(&base, attempt);
            let taken = user::Entity::find()
                .filter(user::Column::Username.eq(&candidate))
                .count(&*txn)
                .await?;
            if taken == 0 {
                username = Some(candidate);
                break;
            }
        }
        let username = username.unwrap_or_else(|| {
            rules::candidate_username(&base, rand::random::<u32>() % 1_000_000 + 101)
        });
        let account = user::ActiveModel {
            id: Set(Uuid::now_v7()),
            username: Set(username),
            password_hash: Set(NO_PASSWORD.to_owned()),
            role: Set(role),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(&*txn)
        .await;
        let account = match account {
            Ok(account) => account,
            Err(error) if matches!(error.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
                return Err(AppError::Conflict(
                    "another sign-in took this username at the same moment; sign in again".into(),
                ));
            }
            Err(error) => return Err(error.into()),
        };
        insert_identity(&txn, identity, account.id, now).await?;
        txn.commit().await?;
        tracing::info!(user_id = %account.id, username = %account.username, role = ?role, "account created by OIDC login");
        Ok(account)
    }

    /// Attaches the identity to `user`; `CONFLICT` when it already signs in
    /// as another account, or the account already has an identity here.
    async fn link(&self, user: Uuid, identity: &VerifiedIdentity) -> AppResult<()> {
        let existing =
            oidc_identity::Entity::find_by_id((identity.issuer.clone(), identity.subject.clone()))
                .one(&self.db)
                .await?;
        match existing {
            Some(row) if row.user_id == user => return Ok(()),
            Some(_) => {
                return Err(AppError::Conflict(
                    "this identity already signs in to another account".into(),
                ));
            }
            None => {}
        }
        let txn = db::begin_write(&self.db).await?;
        insert_identity(&txn, identity, user, Utc::now()).await?;
        txn.commit().await?;
        tracing::info!(user_id = %user, "OIDC identity linked");
        Ok(())
    }
}

async fn insert_identity(
    txn: &db::WriteTxn,
    identity: &VerifiedIdentity,
    user: Uuid,
    now: DateTime<Utc>,
) -> AppResult<()> {
    let inserted = oidc_identity::ActiveModel {
        issuer: Set(identity.issuer.clone()),
        subject: Set(identity.subject.clone()),
        user_id: Set(user),
        created_at: Set(now),
    }
    .insert(&**txn)
    .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(error) if matches!(error.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
            Err(AppError::Conflict(
                "this identity already signs in to another account, or this account already \
                 has an identity at this provider (unlink it first)"
                    .into(),
            ))
        }
        Err(error) => Err(error.into()),
    }
}

fn pkce_label(state: &str) -> String {
    format!("oidc-pkce/{}", token_hash(state))
}
