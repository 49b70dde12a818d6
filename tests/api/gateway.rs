//! The provider gateway against loopback fakes of Kavita and AniList
//! (`gateway_fakes`): linking accounts (Kavita by API key, AniList by
//! OAuth: single use, bound to the user, expiring), the capability
//! manifest, provider checks, the public metadata cache (sent without any
//! credential), and provider cooldowns (capped, persisted, per host).

use chrono::{DateTime, Utc};
use reqwest::header::{COOKIE, LOCATION};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};
use url::Url;

use crate::{
    docs_fakes::{Canned, Served},
    gateway_fakes::{FakeAniList, FakeKavita, serve_anilist, serve_kavita},
    helpers::{AppOptions, Backend, TestApp, Tokens, spawn_app_with},
    on_both_backends,
};

pub(crate) struct Setup {
    pub app: TestApp,
    pub kavita: Served<FakeKavita>,
    pub anilist: Served<FakeAniList>,
}

pub(crate) async fn start(backend: Backend) -> Setup {
    let kavita = serve_kavita(FakeKavita::new(&[
        ("catalog-key", "catalog"),
        ("alice-kavita-key", "alice"),
        ("bob-kavita-key", "bob"),
    ]))
    .await;
    let anilist = serve_anilist(FakeAniList::new()).await;
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_KAVITA_URL", kavita.base.as_str())
            .env("TRELLIS_KAVITA_CATALOG_API_KEY", "catalog-key")
            .env(
                "TRELLIS_ANILIST_API_URL",
                anilist.base.join("graphql").unwrap().as_str(),
            )
            .env("TRELLIS_ANILIST_OAUTH_URL", anilist.base.as_str())
            .env("TRELLIS_ANILIST_CLIENT_ID", &anilist.fake.client_id)
            .env("TRELLIS_ANILIST_CLIENT_SECRET", &anilist.fake.client_secret)
            // Loopback fakes: no need to pace at AniList's degraded 30 a minute.
            .env("TRELLIS_ANILIST_REQUESTS_PER_MINUTE", "600"),
    )
    .await;
    Setup {
        app,
        kavita,
        anilist,
    }
}

const LINKS: &str = "{ providerLinks { provider status accountName accountId } }";

async fn links(app: &TestApp, user: &Tokens) -> Value {
    app.gql(LINKS, json!({}))
        .bearer(&user.access)
        .send()
        .await
        .data()["providerLinks"]
        .clone()
}

async fn start_link(app: &TestApp, user: &Tokens) -> Url {
    let answer = app
        .gql(
            "mutation { startProviderLink(provider: ANILIST) { authorizeUrl callbackUrl expiresAt } }",
            json!({}),
        )
        .bearer(&user.access)
        .send()
        .await;
    Url::parse(
        answer.data()["startProviderLink"]["authorizeUrl"]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

fn state_of(authorize: &Url) -> String {
    authorize
        .query_pairs()
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
        .expect("a state")
}

/// The browser coming back from AniList's consent page.
async fn callback(
    app: &TestApp,
    cookie: Option<&str>,
    query: &[(&str, &str)],
) -> reqwest::Response {
    let mut url = Url::parse(&app.url("/gateway/oauth/anilist/callback")).unwrap();
    url.query_pairs_mut().extend_pairs(query);
    let mut request = app.client.get(url);
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, cookie);
    }
    request.send().await.unwrap()
}

async fn code_of(response: reqwest::Response) -> (u16, Option<String>) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (
        status,
        body["errors"][0]["extensions"]["code"]
            .as_str()
            .map(str::to_owned),
    )
}

/// Links `user`'s AniList account (AniList user `id`, `name`) end to end.
pub(crate) async fn link_anilist(setup: &Setup, user: &Tokens, id: i64, name: &str) {
    let authorize = start_link(&setup.app, user).await;
    let code = setup.anilist.fake.consent(id, name);
    let response = callback(
        &setup.app,
        Some(&user.cookie),
        &[("code", &code), ("state", &state_of(&authorize))],
    )
    .await;
    assert_eq!(response.status().as_u16(), 303);
}

pub(crate) async fn link_kavita(
    app: &TestApp,
    user: &Tokens,
    key: &str,
) -> crate::helpers::GqlResponse {
    app.gql(
        "mutation($k: String!) { linkKavita(apiKey: $k) { provider status accountName } }",
        json!({ "k": key }),
    )
    .bearer(&user.access)
    .send()
    .await
}

async fn kavita_links_with_the_users_own_key_checked_at_once(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    let bob = app.member("bob").await;

    let refused = link_kavita(app, &alice, "not-a-key").await;
    assert_eq!(
        refused.error_code(),
        Some("BAD_USER_INPUT"),
        "{:?}",
        refused.body
    );
    assert_eq!(links(app, &alice).await, json!([]));

    let linked = link_kavita(app, &alice, "alice-kavita-key").await;
    assert_eq!(
        linked.data()["linkKavita"],
        json!({ "provider": "KAVITA", "status": "LINKED", "accountName": "alice" })
    );
    assert!(!linked.body.to_string().contains("alice-kavita-key"));
    assert_eq!(
        setup.kavita.fake.authentications(),
        vec!["not-a-key", "alice-kavita-key"]
    );

    // Stored sealed, never in the clear; per user.
    let db = app.database().await;
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT credential FROM gateway_links",
        ))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let stored: String = rows[0].try_get("", "credential").unwrap();
    assert!(
        !stored.contains("alice-kavita-key") && stored.starts_with("v1."),
        "{stored}"
    );
    assert_eq!(links(app, &bob).await, json!([]));

    let anonymous = app
        .gql(
            "mutation { linkKavita(apiKey: \"alice-kavita-key\") { status } }",
            json!({}),
        )
        .send()
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
    for query in [
        LINKS,
        "{ gatewayCapabilities { protocolVersion } }",
        "{ checkProvider(provider: KAVITA) { ok } }",
        "{ providerMetadata(provider: ANILIST, kind: TITLE, id: \"1\") { cached } }",
    ] {
        let answer = app.gql(query, json!({})).send().await;
        assert_eq!(answer.error_code(), Some("UNAUTHENTICATED"), "{query}");
    }

    let unlink = "mutation { unlinkProvider(provider: KAVITA) }";
    let first = app
        .gql(unlink, json!({}))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(first.data()["unlinkProvider"], true);
    let again = app
        .gql(unlink, json!({}))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(again.data()["unlinkProvider"], false);
    assert_eq!(links(app, &alice).await, json!([]));
}

async fn anilist_oauth_links_once_for_the_user_who_started_it(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    let bob = app.member("bob").await;

    let authorize = start_link(app, &alice).await;
    assert_eq!(authorize.path(), "/api/v2/oauth/authorize");
    assert_eq!(authorize.port(), setup.anilist.base.port());
    let params: std::collections::HashMap<_, _> = authorize.query_pairs().into_owned().collect();
    assert_eq!(params["client_id"], "4242");
    assert_eq!(params["response_type"], "code");
    assert_eq!(
        params["redirect_uri"],
        app.url("/gateway/oauth/anilist/callback")
    );
    assert!(params["state"].len() >= 43, "{}", params["state"]);
    // AniList documents no PKCE: none is sent.
    assert!(!params.contains_key("code_challenge"));

    let state = state_of(&authorize);
    let code = setup.anilist.fake.consent(7, "alice-on-anilist");
    // Signed out: refused (and nothing consumed by it).
    let (status, _) =
        code_of(callback(app, None, &[("code", &code), ("state", &state)]).await).await;
    assert_eq!(status, 401);

    let response = callback(
        app,
        Some(&alice.cookie),
        &[("code", &code), ("state", &state)],
    )
    .await;
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(
        response.headers()[LOCATION].to_str().unwrap(),
        "/settings?linked=anilist"
    );
    assert_eq!(
        links(app, &alice).await,
        json!([{ "provider": "ANILIST", "status": "LINKED",
            "accountName": "alice-on-anilist", "accountId": "7" }])
    );
    let exchanges = setup.anilist.fake.journal.seen("/api/v2/oauth/token");
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0].body["client_secret"], "anilist-client-secret");
    assert_eq!(
        exchanges[0].body["redirect_uri"],
        app.url("/gateway/oauth/anilist/callback")
    );

    // Replayed: refused, nothing new linked, no code exchanged.
    let other = setup.anilist.fake.consent(8, "mallory");
    let (status, code_name) = code_of(
        callback(
            app,
            Some(&alice.cookie),
            &[("code", &other), ("state", &state)],
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, code_name.as_deref()),
        (400, Some("BAD_USER_INPUT"))
    );
    assert_eq!(
        setup.anilist.fake.journal.seen("/api/v2/oauth/token").len(),
        1
    );

    // Bob's state presented by Alice: refused, and used up.
    let bobs = state_of(&start_link(app, &bob).await);
    let (status, code_name) = code_of(
        callback(
            app,
            Some(&alice.cookie),
            &[("code", &other), ("state", &bobs)],
        )
        .await,
    )
    .await;
    assert_eq!((status, code_name.as_deref()), (403, Some("FORBIDDEN")));
    let (status, _) = code_of(
        callback(
            app,
            Some(&bob.cookie),
            &[("code", &other), ("state", &bobs)],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(links(app, &bob).await, json!([]));
    assert_eq!(links(app, &alice).await[0]["accountId"], "7");

    // Expired: refused.
    let late = state_of(&start_link(app, &bob).await);
    let db = app.database().await;
    let past = (Utc::now() - chrono::TimeDelta::minutes(11)).to_rfc3339();
    let sql = match backend {
        Backend::Sqlite => format!("UPDATE gateway_oauth_states SET expires_at = '{past}'"),
        _ => format!("UPDATE gateway_oauth_states SET expires_at = '{past}'::timestamptz"),
    };
    db.execute_unprepared(&sql).await.unwrap();
    let (status, _) = code_of(
        callback(
            app,
            Some(&bob.cookie),
            &[("code", &other), ("state", &late)],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(links(app, &bob).await, json!([]));

    // Declined on AniList's page: the state is spent, nothing linked.
    let declined = state_of(&start_link(app, &bob).await);
    let (status, _) = code_of(
        callback(
            app,
            Some(&bob.cookie),
            &[("error", "access_denied"), ("state", &declined)],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = code_of(
        callback(
            app,
            Some(&bob.cookie),
            &[("code", &other), ("state", &declined)],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);

    // A browser sent back with a spent state gets a page, same status.
    let mut url = Url::parse(&app.url("/gateway/oauth/anilist/callback")).unwrap();
    url.query_pairs_mut()
        .extend_pairs([("code", other.as_str()), ("state", declined.as_str())]);
    let page = app
        .client
        .get(url)
        .header(COOKIE, &bob.cookie)
        .header("accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 400);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{:?}",
        page.headers()
    );
    assert!(page.headers().contains_key("content-security-policy"));
    let html = page.text().await.unwrap();
    assert!(html.contains("<code>BAD_USER_INPUT</code>"), "{html}");
    assert!(html.contains(r#"<a href="/gateway">"#), "{html}");
    assert_eq!(links(app, &bob).await, json!([]));

    // A provider that does not exist.
    let unknown = app
        .client
        .get(app.url("/gateway/oauth/myspace/callback?code=x&state=y"))
        .header(COOKIE, &bob.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status().as_u16(), 404);
    assert_eq!(
        setup.anilist.fake.journal.seen("/api/v2/oauth/token").len(),
        1
    );

    // Kavita links with a key, not OAuth.
    let wrong = app
        .gql(
            "mutation { startProviderLink(provider: KAVITA) { authorizeUrl } }",
            json!({}),
        )
        .bearer(&bob.access)
        .send()
        .await;
    assert_eq!(wrong.error_code(), Some("BAD_USER_INPUT"));
}

async fn public_metadata_is_cached_and_never_sent_with_a_credential(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    link_anilist(&setup, &alice, 7, "alice-on-anilist").await;
    assert_eq!(
        link_kavita(app, &alice, "alice-kavita-key").await.data()["linkKavita"]["status"],
        "LINKED"
    );
    let lookup = |provider: &str, kind: &str, id: Option<&str>, query: Option<&str>| {
        let document = format!(
            "query($id: String, $q: String) {{ providerMetadata(provider: {provider}, kind: {kind}, id: $id, query: $q) {{ provider kind cached payload }} }}"
        );
        let variables = json!({ "id": id, "q": query });
        let app = &setup.app;
        let access = alice.access.clone();
        async move { app.gql(&document, variables).bearer(&access).send().await }
    };
    let before = setup.anilist.fake.graphql_requests().len();

    let first = lookup("ANILIST", "TITLE", Some("30013"), None).await;
    let data = &first.data()["providerMetadata"];
    assert_eq!(data["cached"], false);
    assert_eq!(data["payload"]["Media"]["title"]["english"], "One Piece");
    let second = lookup("ANILIST", "TITLE", Some(" 30013 "), None).await;
    assert_eq!(second.data()["providerMetadata"]["cached"], true);
    assert_eq!(
        second.data()["providerMetadata"]["payload"],
        data["payload"]
    );

    let search = lookup("ANILIST", "SEARCH", None, Some("One  PIECE")).await;
    assert_eq!(search.data()["providerMetadata"]["cached"], false);
    assert_eq!(
        search.data()["providerMetadata"]["payload"]["Page"]["media"][0]["id"],
        30013
    );
    let normalized = lookup("ANILIST", "SEARCH", None, Some(" one piece")).await;
    assert_eq!(normalized.data()["providerMetadata"]["cached"], true);

    let missing = lookup("ANILIST", "TITLE", Some("999"), None).await;
    assert_eq!(
        missing.error_code(),
        Some("NOT_FOUND"),
        "{:?}",
        missing.body
    );

    let public = &setup.anilist.fake.graphql_requests()[before..];
    assert_eq!(public.len(), 3, "two misses and the unknown title");
    assert!(
        public.iter().all(|seen| seen.authorization.is_none()),
        "{public:?}"
    );

    // Kavita's catalog goes with the catalog account's token only.
    let series = lookup("KAVITA", "TITLE", Some("1"), None).await;
    assert_eq!(
        series.data()["providerMetadata"]["payload"]["name"],
        "Yotsuba&!"
    );
    let unknown = lookup("KAVITA", "TITLE", Some("99"), None).await;
    assert_eq!(unknown.error_code(), Some("NOT_FOUND"));
    assert_eq!(
        setup.kavita.fake.authentications(),
        vec!["alice-kavita-key", "catalog-key"],
        "one token for the catalog, reused"
    );
    let catalog_reads = setup.kavita.fake.journal.all();
    let series_reads: Vec<_> = catalog_reads
        .iter()
        .filter(|seen| seen.path.starts_with("/api/Series/"))
        .collect();
    assert_eq!(series_reads.len(), 2);
    for seen in series_reads {
        let token = seen
            .authorization
            .as_deref()
            .unwrap()
            .strip_prefix("Bearer ")
            .unwrap();
        let payload = token.split('.').nth(1).unwrap();
        let claims: Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(claims["nameid"], "catalog");
    }

    let incomplete = lookup("ANILIST", "TITLE", None, None).await;
    assert_eq!(incomplete.error_code(), Some("BAD_USER_INPUT"));
}

async fn a_429_cools_the_host_down_for_at_most_an_hour_across_restarts(backend: Backend) {
    let mut setup = start(backend).await;
    let alice = setup.app.member("alice").await;
    let media = "query($id: String) { providerMetadata(provider: ANILIST, kind: TITLE, id: $id) { cached } }";
    setup.anilist.fake.journal.script(
        "/graphql",
        vec![Canned(
            429,
            vec![
                ("retry-after", "86400".into()),
                ("x-ratelimit-remaining", "0".into()),
                ("content-type", "application/json".into()),
            ],
            br#"{"errors":[{"message":"Too Many Requests.","status":429}],"data":null}"#.to_vec(),
        )],
    );
    let asked_at = Utc::now();
    let limited = setup
        .app
        .gql(media, json!({ "id": "30013" }))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(
        limited.error_code(),
        Some("RATE_LIMITED"),
        "{:?}",
        limited.body
    );
    let retry_after = limited.body["errors"][0]["extensions"]["retryAfter"]
        .as_u64()
        .unwrap();
    assert!((3500..=3600).contains(&retry_after), "{retry_after}");

    let manifest = setup
        .app
        .gql(
            "{ gatewayCapabilities { providers { provider cooldowns { host until } } } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    let providers = manifest.data()["gatewayCapabilities"]["providers"]
        .as_array()
        .unwrap()
        .clone();
    let cooldowns =
        |name: &str| providers.iter().find(|p| p["provider"] == name).unwrap()["cooldowns"].clone();
    let anilist_host = format!("127.0.0.1:{}", setup.anilist.base.port().unwrap());
    assert_eq!(cooldowns("ANILIST")[0]["host"], anilist_host.as_str());
    let until: DateTime<Utc> = cooldowns("ANILIST")[0]["until"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let capped = until - asked_at;
    assert!(
        capped <= chrono::TimeDelta::seconds(3601) && capped >= chrono::TimeDelta::seconds(3590),
        "{capped}"
    );
    assert_eq!(cooldowns("KAVITA"), json!([]));

    // No request reaches the host in cooldown, even for another title.
    let count = setup.anilist.fake.graphql_requests().len();
    assert_eq!(count, 1);
    let again = setup
        .app
        .gql(media, json!({ "id": "104463" }))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(again.error_code(), Some("RATE_LIMITED"));
    assert_eq!(setup.anilist.fake.graphql_requests().len(), 1);

    // Another host is not held up.
    let kavita = setup
        .app
        .gql(
            "{ providerMetadata(provider: KAVITA, kind: TITLE, id: \"2\") { payload } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(
        kavita.data()["providerMetadata"]["payload"]["name"],
        "Frieren"
    );

    // The deadline survives a restart.
    setup.app.kill().await;
    setup.app.restart(&[]).await;
    let alice = setup.app.login("alice", "alice-password").await;
    let after = setup
        .app
        .gql(media, json!({ "id": "30013" }))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(after.error_code(), Some("RATE_LIMITED"));
    assert_eq!(setup.anilist.fake.graphql_requests().len(), 1);
}

async fn checks_probe_credentials_and_kavita_tokens_are_renewed(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    link_anilist(&setup, &alice, 7, "alice-on-anilist").await;
    assert_eq!(
        link_kavita(app, &alice, "alice-kavita-key").await.data()["linkKavita"]["status"],
        "LINKED"
    );
    let check = |provider: &'static str| {
        let access = alice.access.clone();
        async move {
            app.gql(
                &format!("{{ checkProvider(provider: {provider}) {{ ok publicOk accountOk linkStatus messages }} }}"),
                json!({}),
            )
            .bearer(&access)
            .send()
            .await
            .data()["checkProvider"]
                .clone()
        }
    };
    assert_eq!(
        check("ANILIST").await,
        json!({ "ok": true, "publicOk": true, "accountOk": true, "linkStatus": "LINKED", "messages": [] })
    );

    // AniList revokes the token: the link needs the user again.
    setup.anilist.fake.revoke_tokens();
    let revoked = check("ANILIST").await;
    assert_eq!(revoked["ok"], false);
    assert_eq!(
        revoked["publicOk"], true,
        "public reads never carry the token"
    );
    assert_eq!(revoked["accountOk"], false);
    assert_eq!(revoked["linkStatus"], "NEEDS_RELINK");
    let listed = links(app, &alice).await;
    let anilist = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|link| link["provider"] == "ANILIST")
        .unwrap();
    assert_eq!(anilist["status"], "NEEDS_RELINK");

    // Kavita: a 401 on an expired JWT means authenticating again, once.
    let kavita = check("KAVITA").await;
    assert_eq!(kavita["ok"], true, "{kavita}");
    let before = setup.kavita.fake.authentications().len();
    let search = "{ providerMetadata(provider: KAVITA, kind: SEARCH, query: \"fri\") { payload } }";
    let found = app
        .gql(search, json!({}))
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(
        found.data()["providerMetadata"]["payload"]["series"][0]["name"],
        "Frieren"
    );
    assert_eq!(
        setup.kavita.fake.authentications().len(),
        before,
        "the token is reused"
    );
    setup.kavita.fake.expire_tokens();
    let renewed = app
        .gql(
            "{ providerMetadata(provider: KAVITA, kind: TITLE, id: \"1\") { payload } }",
            json!({}),
        )
        .bearer(&alice.access)
        .send()
        .await;
    assert_eq!(renewed.data()["providerMetadata"]["payload"]["id"], 1);
    assert_eq!(
        setup.kavita.fake.authentications()[before..],
        ["catalog-key".to_owned()]
    );
}

async fn the_manifest_says_what_is_supported_configured_and_limited(backend: Backend) {
    let setup = start(backend).await;
    let app = &setup.app;
    let alice = app.member("alice").await;
    let query = "{ gatewayCapabilities { protocolVersion independentMode providers { provider configured linkMethod pkce linkConfigured link { status } features { feature supported configured limitation } } } }";
    let manifest = || async {
        app.gql(query, json!({}))
            .bearer(&alice.access)
            .send()
            .await
            .data()["gatewayCapabilities"]
            .clone()
    };
    let feature = |manifest: &Value, provider: &str, feature: &str| {
        manifest["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == provider)
            .unwrap()["features"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["feature"] == feature)
            .unwrap()
            .clone()
    };
    let unlinked = manifest().await;
    assert_eq!(unlinked["protocolVersion"], 1);
    assert_eq!(unlinked["independentMode"], true);
    let anilist = unlinked["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "ANILIST")
        .unwrap()
        .clone();
    assert_eq!(anilist["linkMethod"], "OAUTH");
    assert_eq!(anilist["pkce"], false);
    assert_eq!(anilist["linkConfigured"], true);
    assert_eq!(anilist["link"], Value::Null);
    assert_eq!(
        feature(&unlinked, "KAVITA", "PUBLIC_METADATA")["configured"],
        true,
        "the catalog key is set"
    );
    assert_eq!(
        feature(&unlinked, "KAVITA", "PROGRESS")["configured"],
        false
    );
    let removal = feature(&unlinked, "ANILIST", "REMOVAL");
    assert_eq!(removal["supported"], true);
    assert!(
        removal["limitation"]
            .as_str()
            .unwrap()
            .contains("bare entries")
    );
    let kavita_scrobble = feature(&unlinked, "KAVITA", "SCROBBLE_FROM_KAVITA");
    assert_eq!(kavita_scrobble["supported"], false);
    assert!(kavita_scrobble["limitation"].is_string());
    assert_eq!(
        feature(&unlinked, "ANILIST", "SCROBBLE_FROM_KAVITA")["configured"],
        false
    );

    link_kavita(app, &alice, "alice-kavita-key").await;
    let half = manifest().await;
    assert_eq!(feature(&half, "KAVITA", "RATING")["configured"], true);
    // Progress on Kavita is per series, written chapter by chapter.
    let kavita_progress = feature(&half, "KAVITA", "PROGRESS");
    assert_eq!(kavita_progress["supported"], true);
    assert_eq!(kavita_progress["configured"], true);
    assert!(
        kavita_progress["limitation"]
            .as_str()
            .unwrap()
            .contains("highest chapter read")
    );
    assert_eq!(
        feature(&half, "ANILIST", "SCROBBLE_FROM_KAVITA")["configured"],
        false,
        "both accounts are needed"
    );
    link_anilist(&setup, &alice, 7, "alice-on-anilist").await;
    let linked = manifest().await;
    assert_eq!(
        feature(&linked, "ANILIST", "SCROBBLE_FROM_KAVITA")["configured"],
        true
    );
    // Another user sees their own state.
    let bob = app.member("bob").await;
    let bobs = app.gql(query, json!({})).bearer(&bob.access).send().await;
    assert_eq!(
        feature(&bobs.data()["gatewayCapabilities"], "KAVITA", "RATING")["configured"],
        false
    );
}

on_both_backends!(
    kavita_links_with_the_users_own_key_checked_at_once,
    anilist_oauth_links_once_for_the_user_who_started_it,
    public_metadata_is_cached_and_never_sent_with_a_credential,
    a_429_cools_the_host_down_for_at_most_an_hour_across_restarts,
    checks_probe_credentials_and_kavita_tokens_are_renewed,
    the_manifest_says_what_is_supported_configured_and_limited,
);
