//! OIDC login end to end against a loopback identity provider
//! (`oidc_fakes`): start → provider → callback → session cookie → `me`,
//! account creation and roles, every refusal, key rotation, linking.

use entity::{oidc_identity, oidc_login_state, session, user};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Statement,
    sea_query::Expr,
};
use serde_json::{Value, json};

use crate::{
    docs_fakes::Served,
    helpers::{ADMIN_PASSWORD, ADMIN_USER, AppOptions, Backend, TestApp, spawn_app_with},
    oidc_fakes::{CLIENT_ID, CLIENT_SECRET, FakeIdp, Flaw, Person, serve_idp},
    on_both_backends,
};

const ADMIN_GROUP: &str = "trellis-admins";

struct Setup {
    app: TestApp,
    idp: Served<FakeIdp>,
}

async fn start_with(backend: Backend, extra: &[(&str, &str)]) -> Setup {
    let idp = serve_idp().await;
    let mut options = AppOptions::default()
        .env("TRELLIS_OIDC_ISSUER", &idp.fake.issuer())
        .env("TRELLIS_OIDC_CLIENT_ID", CLIENT_ID)
        .env("TRELLIS_OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env("TRELLIS_OIDC_ADMIN_GROUP", ADMIN_GROUP)
        .env("TRELLIS_OIDC_DISPLAY_NAME", "Test IdP");
    for (key, value) in extra {
        options = options.env(key, value);
    }
    let app = spawn_app_with(backend, options).await;
    Setup { app, idp }
}

async fn start(backend: Backend) -> Setup {
    start_with(backend, &[]).await
}

/// The `name=value` of every cookie a response sets.
fn cookies_set(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next())
        .map(str::to_owned)
        .collect()
}

fn cookie_named(cookies: &[String], name: &str) -> Option<String> {
    cookies
        .iter()
        .find(|pair| pair.starts_with(&format!("{name}=")) && pair.len() > name.len() + 1)
        .cloned()
}

fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(LOCATION)
        .expect("a Location")
        .to_str()
        .unwrap()
        .to_owned()
}

/// A browser's trip to the provider and back, stopped before the callback.
struct Trip {
    /// The callback URL the provider redirected to.
    callback: String,
    /// The state cookie `/auth/oidc/start` set.
    state_cookie: Option<String>,
}

impl Trip {
    fn state(&self) -> String {
        url::Url::parse(&self.callback)
            .unwrap()
            .query_pairs()
            .find(|(key, _)| key == "state")
            .map(|(_, value)| value.into_owned())
            .expect("a state")
    }
}

/// `GET /auth/oidc/start` (with `query`), then the provider's authorize page.
async fn to_provider_and_back(setup: &Setup, query: &str) -> Trip {
    let app = &setup.app;
    let started = app
        .client
        .get(app.url(&format!("/auth/oidc/start{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 303, "start redirects to the provider");
    let authorize = location(&started);
    assert!(
        authorize.starts_with(&format!("{}/authorize?", setup.idp.fake.issuer())),
        "{authorize}"
    );
    let state_cookie = cookie_named(&cookies_set(&started), "trellis_oidc_state");
    let consented = app.client.get(&authorize).send().await.unwrap();
    assert_eq!(consented.status(), 302);
    Trip {
        callback: location(&consented),
        state_cookie,
    }
}

/// Follows the provider's redirect to our callback with `cookies`.
async fn callback(app: &TestApp, url: &str, cookies: &[&str]) -> reqwest::Response {
    let mut request = app.client.get(url);
    let cookies: Vec<&str> = cookies.to_vec();
    if !cookies.is_empty() {
        request = request.header(COOKIE, cookies.join("; "));
    }
    request.send().await.unwrap()
}

/// Signs `person` in through the provider; the callback's answer.
async fn sign_in(setup: &Setup, person: &Person, flaw: Option<Flaw>) -> reqwest::Response {
    setup.idp.fake.consent(person, flaw);
    let trip = to_provider_and_back(setup, "").await;
    let state_cookie = trip
        .state_cookie
        .clone()
        .expect("start sets the state cookie");
    callback(&setup.app, &trip.callback, &[&state_cookie]).await
}

/// Signs in and returns the session cookie, asserting success.
async fn session_of(setup: &Setup, person: &Person) -> String {
    let response = sign_in(setup, person, None).await;
    assert_eq!(response.status(), 303, "{:?}", response.text().await);
    assert_eq!(location(&response), "/");
    cookie_named(&cookies_set(&response), "trellis_session").expect("a session cookie")
}

async fn me(app: &TestApp, cookie: &str) -> Value {
    app.gql("{ me { username role } }", json!({}))
        .header("cookie", cookie)
        .send()
        .await
        .data()["me"]
        .clone()
}

async fn counts(app: &TestApp) -> (u64, u64) {
    let db = app.database().await;
    (
        user::Entity::find().count(&db).await.unwrap(),
        session::Entity::find().count(&db).await.unwrap(),
    )
}

/// Asserts a callback was refused with `status` and `code`, a message
/// saying `words`, and no session cookie.
async fn assert_refused(response: reqwest::Response, status: u16, code: &str, words: &str) {
    assert!(
        cookie_named(&cookies_set(&response), "trellis_session").is_none(),
        "a refusal sets no session"
    );
    let (got_status, got_code, message) = refusal(response).await;
    assert_eq!((got_status, got_code.as_str()), (status, code), "{message}");
    assert!(message.contains(words), "{words:?} not in {message:?}");
}

/// The JSON error of a refused callback: (status, code, message).
async fn refusal(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        body["errors"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

on_both_backends!(
    a_first_oidc_login_creates_a_member_and_ends_in_the_session_cookie,
    the_admin_group_grants_admin_and_is_kept_in_step,
    a_taken_username_gets_a_suffix_and_never_the_existing_account,
    without_auto_create_an_unknown_identity_is_refused,
    replayed_expired_and_foreign_states_are_refused,
    flawed_id_tokens_are_refused_and_open_no_session,
    rotated_provider_keys_are_fetched_once_and_login_goes_on,
    linking_attaches_an_identity_to_the_signed_in_account,
    password_login_can_be_disabled,
    refused_id_tokens_count_as_failed_logins,
    starting_sign_ins_costs_a_bounded_amount,
    oidc_accounts_set_lasting_passwords_only_from_a_fresh_sign_in,
);

async fn a_first_oidc_login_creates_a_member_and_ends_in_the_session_cookie(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;

    let providers = app
        .gql(
            "{ authProviders { password oidc { displayName startUrl } } }",
            json!({}),
        )
        .send()
        .await;
    let providers = &providers.data()["authProviders"];
    assert_eq!(providers["password"], true);
    assert_eq!(providers["oidc"]["displayName"], "Test IdP");
    assert_eq!(
        providers["oidc"]["startUrl"],
        app.url("/auth/oidc/start").as_str()
    );

    let alice = Person::new("sub-alice", "Alice");
    let response = sign_in(&setup, &alice, None).await;
    assert_eq!(response.status(), 303);
    assert_eq!(location(&response), "/");
    let set = response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    let session = set
        .iter()
        .find(|value| value.starts_with("trellis_session=trs_"))
        .expect("the session cookie");
    // The very cookie a password login sets.
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(session.contains(flag), "{flag} missing from {session}");
    }
    let cookie = session.split(';').next().unwrap().to_owned();
    assert_eq!(
        me(app, &cookie).await,
        json!({ "username": "alice", "role": "MEMBER" })
    );

    // The provider was asked for the discovery document once, and the
    // code was traded with the client's credentials and the PKCE verifier.
    assert_eq!(setup.idp.fake.discovery_fetches(), 1);
    let traded = setup.idp.fake.journal.seen("/token");
    assert_eq!(traded.len(), 1);

    // The same identity again: the same account, no new one.
    let (users, _) = counts(app).await;
    let again = session_of(&setup, &alice).await;
    assert_eq!(me(app, &again).await["username"], "alice");
    assert_eq!(counts(app).await.0, users);
    assert_eq!(
        setup.idp.fake.discovery_fetches(),
        1,
        "the document is cached"
    );

    // A local return_to is kept; a foreign one is not.
    for (asked, landed) in [
        ("?return_to=%2Ffeeds%3Fx%3D1", "/feeds?x=1"),
        ("?return_to=https%3A%2F%2Fevil.example%2F", "/"),
        ("?return_to=%2F%2Fevil.example", "/"),
    ] {
        setup.idp.fake.consent(&alice, None);
        let trip = to_provider_and_back(&setup, asked).await;
        let response = callback(app, &trip.callback, &[&trip.state_cookie.clone().unwrap()]).await;
        assert_eq!(response.status(), 303);
        assert_eq!(location(&response), landed, "{asked}");
    }

    // Logging out ends the OIDC session like any other.
    let out = app
        .gql("mutation { logout }", json!({}))
        .header("cookie", &cookie)
        .send()
        .await;
    assert_eq!(out.data()["logout"], true);
    assert_eq!(me(app, &cookie).await, Value::Null);
}

async fn the_admin_group_grants_admin_and_is_kept_in_step(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let boss = Person::new("sub-boss", "boss").in_group(ADMIN_GROUP);
    let cookie = session_of(&setup, &boss).await;
    assert_eq!(
        me(app, &cookie).await,
        json!({ "username": "boss", "role": "ADMIN" })
    );
    let users = app
        .gql("{ users(first: 10) { totalCount } }", json!({}))
        .header("cookie", &cookie)
        .send()
        .await;
    assert_eq!(users.data()["users"]["totalCount"], 2);

    // Out of the group at the provider: a MEMBER from the next login on.
    let demoted = Person::new("sub-boss", "boss").in_group("staff");
    let cookie = session_of(&setup, &demoted).await;
    assert_eq!(
        me(app, &cookie).await,
        json!({ "username": "boss", "role": "MEMBER" })
    );
}

async fn a_taken_username_gets_a_suffix_and_never_the_existing_account(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let existing = app.member("alice").await;
    let impostor = Person::new("sub-other-alice", "alice");
    let cookie = session_of(&setup, &impostor).await;
    assert_eq!(
        me(app, &cookie).await,
        json!({ "username": "alice-2", "role": "MEMBER" })
    );
    // The password account is untouched and not linked.
    assert_eq!(me(app, &existing.cookie).await["username"], "alice");
    let db = app.database().await;
    let linked: Vec<_> = oidc_identity::Entity::find()
        .find_also_related(user::Entity)
        .all(&db)
        .await
        .unwrap();
    assert_eq!(linked.len(), 1);
    assert_eq!(linked[0].1.as_ref().unwrap().username, "alice-2");
    // An account made by OIDC has no password that works.
    let login = app.login_response("alice-2", "any-password-at-all").await;
    assert_eq!(login.error_code(), Some("UNAUTHENTICATED"));
}

async fn without_auto_create_an_unknown_identity_is_refused(backend: Backend) {
    let setup = start_with(backend, &[("TRELLIS_OIDC_AUTO_CREATE", "false")]).await;
    let app = &setup.app;
    let before = counts(app).await;
    let response = sign_in(&setup, &Person::new("sub-stranger", "stranger"), None).await;
    assert_refused(response, 403, "FORBIDDEN", "TRELLIS_OIDC_AUTO_CREATE").await;
    assert_eq!(counts(app).await, before, "no account, no session");
}

async fn replayed_expired_and_foreign_states_are_refused(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = Person::new("sub-alice", "alice");

    // Replayed: the first callback signs in, the same one again is refused.
    setup.idp.fake.consent(&alice, None);
    let trip = to_provider_and_back(&setup, "").await;
    let state_cookie = trip.state_cookie.clone().unwrap();
    let first = callback(app, &trip.callback, &[&state_cookie]).await;
    assert_eq!(first.status(), 303);
    let before = counts(app).await;
    let replay = callback(app, &trip.callback, &[&state_cookie]).await;
    assert_refused(replay, 400, "BAD_USER_INPUT", "already used").await;
    assert_eq!(counts(app).await, before);

    // Expired: the transaction is backdated past its ten minutes.
    setup.idp.fake.consent(&alice, None);
    let trip = to_provider_and_back(&setup, "").await;
    let db = app.database().await;
    expire_login_states(&db).await;
    let late = callback(app, &trip.callback, &[&trip.state_cookie.clone().unwrap()]).await;
    assert_refused(late, 400, "BAD_USER_INPUT", "ten minutes").await;
    assert_eq!(counts(app).await, before);

    // Another browser (without the state cookie) cannot finish a login.
    setup.idp.fake.consent(&alice, None);
    let trip = to_provider_and_back(&setup, "").await;
    let foreign = callback(app, &trip.callback, &[]).await;
    assert_refused(foreign, 400, "BAD_USER_INPUT", "another browser").await;
    // ... and that spent the state: its own browser cannot either.
    let spent = callback(app, &trip.callback, &[&trip.state_cookie.clone().unwrap()]).await;
    assert_eq!(spent.status(), 400);

    // An unknown state, and a declined authorization.
    let unknown = callback(
        app,
        &app.url("/auth/oidc/callback?code=x&state=st_never-issued"),
        &[],
    )
    .await;
    assert_eq!(unknown.status(), 400);
    setup.idp.fake.decline();
    let trip = to_provider_and_back(&setup, "").await;
    let declined = callback(app, &trip.callback, &[&trip.state_cookie.clone().unwrap()]).await;
    assert_refused(declined, 400, "BAD_USER_INPUT", "access_denied").await;
    assert_eq!(counts(app).await, before);
    assert_eq!(
        oidc_login_state::Entity::find().count(&db).await.unwrap(),
        0,
        "every transaction was spent: {}",
        trip.state()
    );
}

async fn flawed_id_tokens_are_refused_and_open_no_session(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = Person::new("sub-alice", "alice");
    let before = counts(app).await;
    for (flaw, words) in [
        (Flaw::Tampered, "signature"),
        (Flaw::WrongAudience, "another client"),
        (Flaw::Expired, "expired"),
        (Flaw::WrongNonce, "nonce"),
    ] {
        let response = sign_in(&setup, &alice, Some(flaw)).await;
        assert_refused(response, 401, "UNAUTHENTICATED", words).await;
        assert_eq!(counts(app).await, before, "{flaw:?}: nothing created");
    }
    // A tampered token never made the keys be fetched again.
    assert_eq!(setup.idp.fake.jwks_fetches(), 1);
    // And a sound one still works.
    let cookie = session_of(&setup, &alice).await;
    assert_eq!(me(app, &cookie).await["username"], "alice");
}

async fn rotated_provider_keys_are_fetched_once_and_login_goes_on(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = Person::new("sub-alice", "alice");
    session_of(&setup, &alice).await;
    assert_eq!(setup.idp.fake.jwks_fetches(), 1);

    setup.idp.fake.rotate();
    let cookie = session_of(&setup, &alice).await;
    assert_eq!(me(app, &cookie).await["username"], "alice");
    assert_eq!(
        setup.idp.fake.jwks_fetches(),
        2,
        "fetched once on the new kid"
    );
    session_of(&setup, &alice).await;
    assert_eq!(setup.idp.fake.jwks_fetches(), 2, "then cached");
    assert_eq!(setup.idp.fake.discovery_fetches(), 1);
}

async fn link(setup: &Setup, cookie: &str, person: &Person) -> reqwest::Response {
    let app = &setup.app;
    let started = app
        .gql(
            "mutation { linkOidc { authorizeUrl expiresAt } }",
            json!({}),
        )
        .header("cookie", cookie)
        .send()
        .await;
    let authorize = started.data()["linkOidc"]["authorizeUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    setup.idp.fake.consent(person, None);
    let consented = app.client.get(&authorize).send().await.unwrap();
    assert_eq!(consented.status(), 302);
    callback(app, &location(&consented), &[cookie]).await
}

async fn linking_attaches_an_identity_to_the_signed_in_account(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let bob = app.member("bob").await;
    let bobs_identity = Person::new("sub-robert", "robert");

    // Signed out, linking is refused.
    let anonymous = app
        .gql("mutation { linkOidc { authorizeUrl } }", json!({}))
        .send()
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));

    let linked = link(&setup, &bob.cookie, &bobs_identity).await;
    assert_eq!(linked.status(), 303);
    assert_eq!(location(&linked), "/settings?linked=oidc");
    // Signing in with the identity now signs in as bob (not a new "robert").
    let cookie = session_of(&setup, &bobs_identity).await;
    assert_eq!(
        me(app, &cookie).await,
        json!({ "username": "bob", "role": "MEMBER" })
    );

    // Another account cannot take an identity that is bob's.
    let carol = app.member("carol").await;
    let taken = link(&setup, &carol.cookie, &bobs_identity).await;
    assert_refused(taken, 409, "CONFLICT", "another account").await;

    // A link finished by another signed-in account is refused.
    let started = app
        .gql("mutation { linkOidc { authorizeUrl } }", json!({}))
        .header("cookie", &carol.cookie)
        .send()
        .await;
    let authorize = started.data()["linkOidc"]["authorizeUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    setup
        .idp
        .fake
        .consent(&Person::new("sub-carol", "carol"), None);
    let consented = app.client.get(&authorize).send().await.unwrap();
    let hijacked = callback(app, &location(&consented), &[&bob.cookie]).await;
    assert_refused(hijacked, 403, "FORBIDDEN", "started by another account").await;

    // Bob unlinks (he has a password); the identity then makes a new account.
    let unlinked = app
        .gql("mutation { unlinkOidc }", json!({}))
        .header("cookie", &bob.cookie)
        .send()
        .await;
    assert_eq!(unlinked.data()["unlinkOidc"], true);
    let again = app
        .gql("mutation { unlinkOidc }", json!({}))
        .header("cookie", &bob.cookie)
        .send()
        .await;
    assert_eq!(again.data()["unlinkOidc"], false);
    let cookie = session_of(&setup, &bobs_identity).await;
    assert_eq!(me(app, &cookie).await["username"], "robert");

    // Robert's account exists only through OIDC: unlinking would lock it out.
    let refused = app
        .gql("mutation { unlinkOidc }", json!({}))
        .header("cookie", &cookie)
        .send()
        .await;
    assert_eq!(refused.error_code(), Some("FORBIDDEN"));
    let db = app.database().await;
    assert_eq!(
        oidc_identity::Entity::find()
            .filter(oidc_identity::Column::Subject.eq("sub-robert"))
            .count(&db)
            .await
            .unwrap(),
        1
    );
}

async fn password_login_can_be_disabled(backend: Backend) {
    let setup = start_with(backend, &[("TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN", "true")]).await;
    let app = &setup.app;
    let refused = app.login_response(ADMIN_USER, ADMIN_PASSWORD).await;
    assert_eq!(refused.error_code(), Some("FORBIDDEN"));
    let message = refused.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("password login is disabled"), "{message}");
    let providers = app
        .gql(
            "{ authProviders { password oidc { displayName } } }",
            json!({}),
        )
        .send()
        .await;
    assert_eq!(providers.data()["authProviders"]["password"], false);
    // The configured first admin was still created at start-up.
    let db = app.database().await;
    let admin = user::Entity::find()
        .filter(user::Column::Username.eq(ADMIN_USER))
        .one(&db)
        .await
        .unwrap();
    assert!(admin.is_some());
    // OIDC login still works.
    let cookie = session_of(&setup, &Person::new("sub-alice", "alice")).await;
    assert_eq!(me(app, &cookie).await["username"], "alice");
}

async fn refused_id_tokens_count_as_failed_logins(backend: Backend) {
    let setup = start_with(backend, &[("TRELLIS_LOGIN_MAX_ATTEMPTS", "2")]).await;
    let alice = Person::new("sub-alice", "alice");
    for _ in 0..2 {
        let response = sign_in(&setup, &alice, Some(Flaw::Tampered)).await;
        assert_refused(response, 401, "UNAUTHENTICATED", "signature").await;
    }
    // The address is blocked now, even for a sound id_token.
    let blocked = sign_in(&setup, &alice, None).await;
    assert!(blocked.headers().get("retry-after").is_some());
    assert_refused(blocked, 429, "RATE_LIMITED", "too many attempts").await;
    // Password logins keep their own budget.
    let login = setup.app.login_response(ADMIN_USER, ADMIN_PASSWORD).await;
    assert!(login.body.get("errors").is_none(), "{}", login.body);
}

/// Backdates every started authorization past its ten minutes.
async fn expire_login_states(db: &sea_orm::DatabaseConnection) {
    oidc_login_state::Entity::update_many()
        .col_expr(
            oidc_login_state::Column::CreatedAt,
            Expr::value(chrono::Utc::now() - chrono::TimeDelta::minutes(11)),
        )
        .filter(oidc_login_state::Column::StateHash.is_not_null())
        .exec(db)
        .await
        .unwrap();
}

/// `GET /auth/oidc/start` as seen from `address` (through the trusted proxy).
async fn start_from(app: &TestApp, address: &str) -> reqwest::Response {
    app.client
        .get(app.url("/auth/oidc/start"))
        .header("x-forwarded-for", address)
        .send()
        .await
        .unwrap()
}

async fn starting_sign_ins_costs_a_bounded_amount(backend: Backend) {
    const STARTS_PER_MINUTE: usize = 30;
    const MAX_PENDING: u64 = 10_000;
    let setup = start_with(backend, &[("TRELLIS_TRUSTED_PROXIES", "127.0.0.1")]).await;
    let app = &setup.app;
    let db = app.database().await;
    let pending = || async { oidc_login_state::Entity::find().count(&db).await.unwrap() };

    // An address gets thirty a minute; the next one is refused and stores nothing.
    for _ in 0..STARTS_PER_MINUTE {
        assert_eq!(start_from(app, "198.51.100.1").await.status(), 303);
    }
    let refused = start_from(app, "198.51.100.1").await;
    assert!(refused.headers().get("retry-after").is_some());
    assert_refused(refused, 429, "RATE_LIMITED", "too many attempts").await;
    assert_eq!(pending().await, STARTS_PER_MINUTE as u64);
    // Another address has its own budget.
    assert_eq!(start_from(app, "198.51.100.2").await.status(), 303);

    // An IPv6 host's /64 is one budget: walking the subnet gains nothing.
    for i in 0..STARTS_PER_MINUTE {
        let address = format!("2001:db8:0:7::{:x}", i + 1);
        assert_eq!(start_from(app, &address).await.status(), 303);
    }
    assert_eq!(start_from(app, "2001:db8:0:7::ffff").await.status(), 429);
    assert_eq!(start_from(app, "2001:db8:0:8::1").await.status(), 303);

    // Links spend the account's budget, not the address's.
    let admin = app.admin().await;
    let link_start = || async {
        app.gql("mutation { linkOidc { authorizeUrl } }", json!({}))
            .bearer(&admin.access)
            .send()
            .await
    };
    for _ in 0..STARTS_PER_MINUTE {
        assert!(link_start().await.body.get("errors").is_none());
    }
    assert_eq!(link_start().await.error_code(), Some("RATE_LIMITED"));
    assert_eq!(start_from(app, "198.51.100.3").await.status(), 303);

    // Everyone's unfinished sign-ins together are capped: at the cap a new
    // start is refused and the table does not grow.
    let held = pending().await;
    let fill = match db.get_database_backend() {
        sea_orm::DbBackend::Postgres => {
            "INSERT INTO oidc_login_states (state_hash, nonce, pkce_verifier, purpose, created_at) \
             SELECT 'h' || n, 'n', 'v', 'login', $1 FROM generate_series(1, $2) AS n"
        }
        _ => {
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) \
             INSERT INTO oidc_login_states (state_hash, nonce, pkce_verifier, purpose, created_at) \
             SELECT 'h' || i, 'n', 'v', 'login', $1 FROM n"
        }
    };
    let room = i64::try_from(MAX_PENDING - held).unwrap();
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        fill,
        [chrono::Utc::now().into(), room.into()],
    ))
    .await
    .unwrap();
    assert_eq!(pending().await, MAX_PENDING);
    let full = start_from(app, "198.51.100.4").await;
    assert_refused(full, 429, "RATE_LIMITED", "too many attempts").await;
    assert_eq!(pending().await, MAX_PENDING);

    // Expired ones make room as new ones come.
    expire_login_states(&db).await;
    assert_eq!(start_from(app, "198.51.100.4").await.status(), 303);
    assert_eq!(pending().await, 1);
}

/// Google Reader's `ClientLogin` status for `username` / `password`.
async fn client_login(app: &TestApp, username: &str, password: &str) -> u16 {
    app.client
        .post(app.url("/accounts/ClientLogin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("Email={username}&Passwd={password}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn oidc_accounts_set_lasting_passwords_only_from_a_fresh_sign_in(backend: Backend) {
    // Password login is off: reader apps, which cannot speak OIDC, still
    // sign in with a reader password.
    let setup = start_with(backend, &[("TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN", "true")]).await;
    let app = &setup.app;
    let cookie = session_of(&setup, &Person::new("sub-alice", "alice")).await;
    let set_reader = |current: Option<&'static str>| {
        let cookie = cookie.clone();
        async move {
            app.gql(
                "mutation($c: String, $p: String!) { setReaderPassword(currentPassword: $c, password: $p) }",
                json!({ "c": current, "p": "reader-secret-1" }),
            )
            .header("cookie", &cookie)
            .send()
            .await
        }
    };
    assert_eq!(client_login(app, "alice", "reader-secret-1").await, 401);
    // Just signed in at the provider: no account password is asked for.
    let set = set_reader(None).await;
    assert_eq!(set.data()["setReaderPassword"], true, "{}", set.body);
    assert_eq!(client_login(app, "alice", "reader-secret-1").await, 200);

    // Eleven minutes later the session no longer proves its owner: a
    // stolen one cannot plant a lasting credential.
    let db = app.database().await;
    session::Entity::update_many()
        .col_expr(
            session::Column::CreatedAt,
            Expr::value(chrono::Utc::now() - chrono::TimeDelta::minutes(11)),
        )
        .filter(session::Column::Id.is_not_null())
        .exec(&db)
        .await
        .unwrap();
    let stale = set_reader(None).await;
    assert_eq!(stale.error_code(), Some("FORBIDDEN"), "{}", stale.body);
    let message = stale.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("sign in again"), "{message}");
    let change = app
        .gql(
            "mutation { changePassword(newPassword: \"account-secret-1\") }",
            json!({}),
        )
        .header("cookie", &cookie)
        .send()
        .await;
    assert_eq!(change.error_code(), Some("FORBIDDEN"), "{}", change.body);

    // A fresh sign-in sets the account's first password.
    let fresh = session_of(&setup, &Person::new("sub-alice", "alice")).await;
    let first = app
        .gql(
            "mutation { changePassword(newPassword: \"account-secret-1\") }",
            json!({}),
        )
        .header("cookie", &fresh)
        .send()
        .await;
    assert_eq!(first.data()["changePassword"], true, "{}", first.body);
    // ... after which the password is asked for, like anyone's.
    let without = app
        .gql(
            "mutation { setReaderPassword(password: \"reader-secret-2\") }",
            json!({}),
        )
        .header("cookie", &fresh)
        .send()
        .await;
    assert_eq!(
        without.error_code(),
        Some("BAD_USER_INPUT"),
        "{}",
        without.body
    );
    let with = app
        .gql(
            "mutation { setReaderPassword(currentPassword: \"account-secret-1\", password: \"reader-secret-2\") }",
            json!({}),
        )
        .header("cookie", &fresh)
        .send()
        .await;
    assert_eq!(with.data()["setReaderPassword"], true, "{}", with.body);
    assert_eq!(client_login(app, "alice", "reader-secret-2").await, 200);
}
