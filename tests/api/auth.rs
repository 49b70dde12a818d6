use chrono::Utc;
use serde_json::json;

use crate::{
    helpers::{
        ADMIN_PASSWORD, ADMIN_USER, AppOptions, Backend, JWT_SECRET, TestApp, spawn_app,
        spawn_app_with,
    },
    on_both_backends,
};

on_both_backends!(
    login_succeeds_and_bearer_authenticates,
    wrong_password_and_unknown_user_fail_alike,
    session_cookie_has_protective_flags_and_authenticates,
    secure_cookie_only_behind_trusted_https_proxy,
    expired_or_forged_access_token_is_unauthenticated,
    refresh_rotates_and_reuse_revokes_the_family,
    logout_revokes_cookie_refresh_and_access_tokens,
    failed_logins_are_rate_limited_then_released,
    forwarded_for_is_honoured_only_from_trusted_proxies,
    member_gets_forbidden_and_anonymous_unauthenticated,
    admin_creates_users_and_lists_them_page_by_page,
    change_password_signs_out_other_sessions,
    parallel_wrong_logins_past_the_limit_are_refused_before_any_hashing,
    wrong_current_passwords_are_throttled_like_failed_logins,
    a_stranger_cannot_lock_an_account_from_another_address,
    a_stale_reader_password_does_not_lock_the_web_login,
    reader_credentials_cannot_be_forged_from_a_database_dump,
    without_a_configured_secret_a_private_key_file_is_made,
);

async fn login_succeeds_and_bearer_authenticates(backend: Backend) {
    let app = spawn_app(backend).await;
    let response = app.login_response("  Admin ", ADMIN_PASSWORD).await;
    let login = &response.data()["login"];
    assert_eq!(login["user"]["username"], ADMIN_USER);
    assert_eq!(login["user"]["role"], "ADMIN");
    let expires_at: chrono::DateTime<Utc> = login["expiresAt"].as_str().unwrap().parse().unwrap();
    assert!(expires_at > Utc::now());

    let token = login["accessToken"].as_str().unwrap();
    let me = app
        .gql("{ me { username role } }", json!({}))
        .bearer(token)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], ADMIN_USER);

    let anonymous = app.gql("{ me { username } }", json!({})).send().await;
    assert!(anonymous.data()["me"].is_null());
}

async fn wrong_password_and_unknown_user_fail_alike(backend: Backend) {
    let app = spawn_app(backend).await;
    let wrong = app.login_response(ADMIN_USER, "not-the-password").await;
    let unknown = app.login_response("nobody", "not-the-password").await;
    for response in [&wrong, &unknown] {
        assert_eq!(response.error_code(), Some("UNAUTHENTICATED"));
        assert_eq!(
            response.body["errors"][0]["message"],
            "invalid username or password"
        );
        assert!(response.set_cookie().is_none());
        assert!(response.body["data"].is_null());
    }
}

async fn session_cookie_has_protective_flags_and_authenticates(backend: Backend) {
    let app = spawn_app(backend).await;
    let response = app.login_response(ADMIN_USER, ADMIN_PASSWORD).await;
    let cookie = response.set_cookie().expect("session cookie");
    assert!(cookie.starts_with("trellis_session=trs_"), "{cookie}");
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(flag), "{flag} missing in {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP must not get Secure: {cookie}"
    );

    let pair = cookie.split(';').next().unwrap();
    let me = app
        .gql("{ me { username } }", json!({}))
        .header("cookie", pair)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], ADMIN_USER);

    let forged = app
        .gql("{ me { username } }", json!({}))
        .header("cookie", "trellis_session=trs_forged")
        .send()
        .await;
    assert!(forged.data()["me"].is_null());
}

async fn secure_cookie_only_behind_trusted_https_proxy(backend: Backend) {
    let untrusted = spawn_app(backend).await;
    let response = untrusted
        .gql(
            "mutation { login(username: \"admin\", password: \"admin-password-123\") { accessToken } }",
            json!({}),
        )
        .header("x-forwarded-proto", "https")
        .send()
        .await;
    assert!(!response.set_cookie().unwrap().contains("Secure"));

    let trusted = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_TRUSTED_PROXIES", "127.0.0.1"),
    )
    .await;
    let response = trusted
        .gql(
            "mutation { login(username: \"admin\", password: \"admin-password-123\") { accessToken } }",
            json!({}),
        )
        .header("x-forwarded-proto", "https")
        .send()
        .await;
    assert!(response.set_cookie().unwrap().contains("Secure"));
}

async fn expired_or_forged_access_token_is_unauthenticated(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let claims: serde_json::Value = {
        let payload = tokens.access.split('.').nth(1).unwrap();
        use base64::Engine;
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap(),
        )
        .unwrap()
    };
    let now = Utc::now().timestamp();
    let mint = |secret: &str, exp: i64| {
        let claims = json!({ "sub": claims["sub"], "sid": claims["sid"], "iat": now - 600, "exp": exp, "iss": "trellis" });
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap(),
        )
        .unwrap()
    };

    let still_valid = app
        .gql("{ me { username } }", json!({}))
        .bearer(&mint(JWT_SECRET, now + 60))
        .send()
        .await;
    assert_eq!(still_valid.data()["me"]["username"], ADMIN_USER);

    let expired = app
        .gql("{ me { username } }", json!({}))
        .bearer(&mint(JWT_SECRET, now - 1))
        .send()
        .await;
    assert_eq!(expired.status, 401);
    assert_eq!(expired.error_code(), Some("UNAUTHENTICATED"));
    assert_eq!(expired.body["errors"][0]["message"], "access token expired");
    assert!(expired.headers.get("www-authenticate").is_some());

    let forged = app
        .gql("{ me { username } }", json!({}))
        .bearer(&mint("another-secret-0123456789abcdef0123456789", now + 60))
        .send()
        .await;
    assert_eq!(forged.status, 401);
    assert_eq!(forged.body["errors"][0]["message"], "invalid access token");
}

async fn refresh_rotates_and_reuse_revokes_the_family(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let refresh = |token: String| {
        let app = &app;
        async move {
            app.gql(
                "mutation($t: String!) { refreshToken(token: $t) { accessToken refreshToken user { username } } }",
                json!({ "t": token }),
            )
            .send()
            .await
        }
    };

    let first = refresh(tokens.refresh.clone()).await;
    let rotated = first.data()["refreshToken"].clone();
    assert_eq!(rotated["user"]["username"], ADMIN_USER);
    let second_refresh = rotated["refreshToken"].as_str().unwrap().to_owned();
    assert_ne!(second_refresh, tokens.refresh);
    let new_access = rotated["accessToken"].as_str().unwrap().to_owned();
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&new_access)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], ADMIN_USER);

    // The spent token comes back: theft is assumed and the family dies.
    let reuse = refresh(tokens.refresh.clone()).await;
    assert_eq!(reuse.error_code(), Some("UNAUTHENTICATED"));
    let after = refresh(second_refresh).await;
    assert_eq!(
        after.error_code(),
        Some("UNAUTHENTICATED"),
        "rotated token must die with its family"
    );
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&new_access)
        .send()
        .await;
    assert_eq!(
        me.status, 401,
        "access tokens of a revoked session stop working"
    );
    let cookie = app
        .gql("{ me { username } }", json!({}))
        .header("cookie", &tokens.cookie)
        .send()
        .await;
    assert!(cookie.data()["me"].is_null());

    let garbage = refresh("trt_unknown".to_owned()).await;
    assert_eq!(garbage.error_code(), Some("UNAUTHENTICATED"));
}

async fn logout_revokes_cookie_refresh_and_access_tokens(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let other = app.admin().await;
    let logout = app
        .gql("mutation { logout }", json!({}))
        .header("cookie", &tokens.cookie)
        .send()
        .await;
    assert_eq!(logout.data()["logout"], true);
    let cleared = logout.set_cookie().unwrap();
    assert!(
        cleared.starts_with("trellis_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );

    let me = app
        .gql("{ me { username } }", json!({}))
        .header("cookie", &tokens.cookie)
        .send()
        .await;
    assert!(me.data()["me"].is_null());
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&tokens.access)
        .send()
        .await;
    assert_eq!(me.status, 401);
    let refresh = app
        .gql(
            "mutation($t: String!) { refreshToken(token: $t) { accessToken } }",
            json!({ "t": tokens.refresh }),
        )
        .send()
        .await;
    assert_eq!(refresh.error_code(), Some("UNAUTHENTICATED"));

    // Other sessions are untouched.
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&other.access)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], ADMIN_USER);

    let anonymous = app.gql("mutation { logout }", json!({})).send().await;
    assert_eq!(anonymous.data()["logout"], false);
}

async fn failed_logins_are_rate_limited_then_released(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_LOGIN_MAX_ATTEMPTS", "3")
            .env("TRELLIS_LOGIN_BLOCK", "2"),
    )
    .await;
    for _ in 0..3 {
        let response = app.login_response(ADMIN_USER, "wrong-password").await;
        assert_eq!(response.error_code(), Some("UNAUTHENTICATED"));
    }
    // Blocked: even the right password is refused, with a hint when to retry.
    let blocked = app.login_response(ADMIN_USER, ADMIN_PASSWORD).await;
    assert_eq!(blocked.error_code(), Some("RATE_LIMITED"));
    let retry_after = blocked.body["errors"][0]["extensions"]["retryAfter"]
        .as_u64()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "retryAfter = {retry_after}");

    tokio::time::sleep(std::time::Duration::from_millis(retry_after * 1000 + 200)).await;
    let released = app.login_response(ADMIN_USER, ADMIN_PASSWORD).await;
    assert_eq!(released.data()["login"]["user"]["username"], ADMIN_USER);
}

async fn forwarded_for_is_honoured_only_from_trusted_proxies(backend: Backend) {
    let options = AppOptions::default()
        .env("TRELLIS_LOGIN_MAX_ATTEMPTS", "3")
        .env("TRELLIS_LOGIN_BLOCK", "300");

    // Untrusted peer: X-Forwarded-For is ignored, so rotating it does not
    // escape the per-address limit.
    let app = spawn_app_with(backend, options.clone()).await;
    for (i, name) in ["u1", "u2", "u3"].iter().enumerate() {
        let response = app
            .gql(&format!("mutation {{ login(username: \"{name}\", password: \"wrong-password\") {{ accessToken }} }}"), json!({}))
            .header("x-forwarded-for", &format!("198.51.100.{i}"))
            .send()
            .await;
        assert_eq!(response.error_code(), Some("UNAUTHENTICATED"));
    }
    let blocked = app
        .gql("mutation { login(username: \"admin\", password: \"admin-password-123\") { accessToken } }", json!({}))
        .header("x-forwarded-for", "198.51.100.99")
        .send()
        .await;
    assert_eq!(blocked.error_code(), Some("RATE_LIMITED"));

    // Trusted proxy: each forwarded client is limited on its own.
    let app = spawn_app_with(
        backend,
        options.env("TRELLIS_TRUSTED_PROXIES", "127.0.0.0/8"),
    )
    .await;
    for name in ["u1", "u2", "u3"] {
        app.gql(&format!("mutation {{ login(username: \"{name}\", password: \"wrong-password\") {{ accessToken }} }}"), json!({}))
            .header("x-forwarded-for", "198.51.100.7")
            .send()
            .await;
    }
    let sprayer = app
        .gql("mutation { login(username: \"admin\", password: \"admin-password-123\") { accessToken } }", json!({}))
        .header("x-forwarded-for", "198.51.100.7")
        .send()
        .await;
    assert_eq!(sprayer.error_code(), Some("RATE_LIMITED"));
    let neighbour = app
        .gql("mutation { login(username: \"admin\", password: \"admin-password-123\") { accessToken } }", json!({}))
        .header("x-forwarded-for", "203.0.113.5, 198.51.100.8")
        .send()
        .await;
    assert!(neighbour.data()["login"]["accessToken"].is_string());
}

async fn member_gets_forbidden_and_anonymous_unauthenticated(backend: Backend) {
    let app = spawn_app(backend).await;
    let member = app.member("mia").await;
    let create = "mutation { createUser(input: { username: \"eve\", password: \"eve-password\", role: ADMIN }) { id } }";

    let forbidden = app
        .gql(create, json!({}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(forbidden.error_code(), Some("FORBIDDEN"));
    let forbidden = app
        .gql("{ users { totalCount } }", json!({}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(forbidden.error_code(), Some("FORBIDDEN"));

    let anonymous = app.gql(create, json!({})).send().await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
    let anonymous = app
        .gql(
            "mutation { changePassword(currentPassword: \"a\", newPassword: \"bbbbbbbbbb\") }",
            json!({}),
        )
        .send()
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));

    // Nothing was created by the refused calls.
    let eve = app.login_response("eve", "eve-password").await;
    assert_eq!(eve.error_code(), Some("UNAUTHENTICATED"));
}

async fn admin_creates_users_and_lists_them_page_by_page(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await;
    let create = |name: &str, password: &str| {
        app.gql(
            "mutation($i: CreateUserInput!) { createUser(input: $i) { username role } }",
            json!({ "i": { "username": name, "password": password } }),
        )
        .bearer(&admin.access)
        .send()
    };
    for name in ["carol", "Bob", "dave"] {
        let created = create(name, "long-enough-pw").await;
        assert_eq!(created.data()["createUser"]["role"], "MEMBER");
    }
    assert_eq!(
        create("BOB", "long-enough-pw").await.error_code(),
        Some("CONFLICT")
    );
    let short = create("frank", "short").await;
    assert_eq!(short.error_code(), Some("BAD_USER_INPUT"));
    assert_eq!(short.body["errors"][0]["extensions"]["field"], "password");
    assert_eq!(
        create("bad name", "long-enough-pw").await.error_code(),
        Some("BAD_USER_INPUT")
    );

    let page = "query($after: String) { users(first: 2, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { username } } }";
    let first = app.gql(page, json!({})).bearer(&admin.access).send().await;
    let users = &first.data()["users"];
    assert_eq!(users["totalCount"], 4);
    assert_eq!(
        users["nodes"],
        json!([{ "username": "admin" }, { "username": "bob" }])
    );
    assert_eq!(users["pageInfo"]["hasNextPage"], true);
    let cursor = users["pageInfo"]["endCursor"].as_str().unwrap();
    let second = app
        .gql(page, json!({ "after": cursor }))
        .bearer(&admin.access)
        .send()
        .await;
    let users = &second.data()["users"];
    assert_eq!(
        users["nodes"],
        json!([{ "username": "carol" }, { "username": "dave" }])
    );
    assert_eq!(users["pageInfo"]["hasNextPage"], false);

    let bad_cursor = app
        .gql(page, json!({ "after": "not-a-cursor" }))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(bad_cursor.error_code(), Some("BAD_USER_INPUT"));
}

async fn change_password_signs_out_other_sessions(backend: Backend) {
    let app = spawn_app(backend).await;
    let here = app.member("nina").await;
    let elsewhere = app.login("nina", "nina-password").await;
    let change = "mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, newPassword: $n) }";

    let wrong = app
        .gql(
            change,
            json!({ "c": "nope-nope", "n": "brand-new-password" }),
        )
        .bearer(&here.access)
        .send()
        .await;
    assert_eq!(wrong.error_code(), Some("BAD_USER_INPUT"));

    let ok = app
        .gql(
            change,
            json!({ "c": "nina-password", "n": "brand-new-password" }),
        )
        .bearer(&here.access)
        .send()
        .await;
    assert_eq!(ok.data()["changePassword"], true);
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&here.access)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], "nina");
    let gone = app
        .gql("{ me { username } }", json!({}))
        .bearer(&elsewhere.access)
        .send()
        .await;
    assert_eq!(gone.status, 401);
    assert_eq!(
        app.login_response("nina", "nina-password")
            .await
            .error_code(),
        Some("UNAUTHENTICATED")
    );
    assert!(
        app.login_response("nina", "brand-new-password")
            .await
            .data()["login"]
            .is_object()
    );
}

async fn parallel_wrong_logins_past_the_limit_are_refused_before_any_hashing(backend: Backend) {
    // The hashing queue never refuses here, so every refusal is the limiter's.
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_LOGIN_MAX_ATTEMPTS", "10")
            .env("TRELLIS_PASSWORD_HASH_WAIT_MS", "600000"),
    )
    .await;
    let answers = futures_util::future::join_all(
        (0..20).map(|_| app.login_response(ADMIN_USER, "wrong-password")),
    )
    .await;
    let count = |code: &str| {
        answers
            .iter()
            .filter(|answer| answer.error_code() == Some(code))
            .count()
    };
    assert_eq!(
        (count("UNAUTHENTICATED"), count("RATE_LIMITED")),
        (10, 10),
        "each attempt is counted before its password is checked"
    );
}

async fn wrong_current_passwords_are_throttled_like_failed_logins(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_LOGIN_MAX_ATTEMPTS", "3")
            .env("TRELLIS_LOGIN_BLOCK", "300"),
    )
    .await;
    let nina = app.member("nina").await;
    let change = "mutation($c: String!) { changePassword(currentPassword: $c, newPassword: \"brand-new-password\") }";
    for guess in ["guess-one", "guess-two", "guess-three"] {
        let wrong = app
            .gql(change, json!({ "c": guess }))
            .bearer(&nina.access)
            .send()
            .await;
        assert_eq!(wrong.error_code(), Some("BAD_USER_INPUT"), "{guess}");
    }
    // A stolen session cannot go on guessing: not even the right password
    // is checked now, through either mutation.
    let blocked = app
        .gql(change, json!({ "c": "nina-password" }))
        .bearer(&nina.access)
        .send()
        .await;
    assert_eq!(blocked.error_code(), Some("RATE_LIMITED"));
    assert!(blocked.body["errors"][0]["extensions"]["retryAfter"].as_u64() > Some(0));
    let reader = app
        .gql(
            "mutation { setReaderPassword(currentPassword: \"nina-password\", password: \"reader-pass-1\") }",
            json!({}),
        )
        .bearer(&nina.access)
        .send()
        .await;
    assert_eq!(reader.error_code(), Some("RATE_LIMITED"));
    let login = app.login_response("nina", "nina-password").await;
    assert_eq!(
        login.error_code(),
        Some("RATE_LIMITED"),
        "one budget per username"
    );
}

/// `login` as the client at `address` (through the trusted loopback proxy).
async fn login_from(app: &TestApp, address: &str, password: &str) -> Option<String> {
    app.gql(
        "mutation($p: String!) { login(username: \"admin\", password: $p) { accessToken } }",
        json!({ "p": password }),
    )
    .header("x-forwarded-for", address)
    .send()
    .await
    .error_code()
    .map(str::to_owned)
}

async fn a_stranger_cannot_lock_an_account_from_another_address(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_TRUSTED_PROXIES", "127.0.0.0/8")
            .env("TRELLIS_LOGIN_MAX_ATTEMPTS", "3")
            .env("TRELLIS_LOGIN_FRESH_ADDRESS_ATTEMPTS", "2")
            .env("TRELLIS_LOGIN_WINDOW", "3600")
            .env("TRELLIS_LOGIN_BLOCK", "300"),
    )
    .await;
    let unauthenticated = Some("UNAUTHENTICATED".to_owned());
    let rate_limited = Some("RATE_LIMITED".to_owned());
    // Three strangers' wrong guesses block the username...
    for address in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        assert_eq!(
            login_from(&app, address, "wrong-password").await,
            unauthenticated
        );
    }
    // ...for the addresses that guessed,
    assert_eq!(
        login_from(&app, "198.51.100.2", ADMIN_PASSWORD).await,
        rate_limited
    );
    // but not for its owner at an address with no failures.
    assert_eq!(login_from(&app, "203.0.113.7", ADMIN_PASSWORD).await, None);

    // Fresh addresses together get only the small extra budget: a botnet
    // cannot go on guessing, and then nobody gets in until the block ends.
    for address in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        assert_eq!(
            login_from(&app, address, "wrong-password").await,
            unauthenticated
        );
    }
    for address in ["192.0.2.10", "192.0.2.11"] {
        assert_eq!(
            login_from(&app, address, "wrong-password").await,
            unauthenticated
        );
    }
    assert_eq!(
        login_from(&app, "192.0.2.12", "wrong-password").await,
        rate_limited
    );
    assert_eq!(
        login_from(&app, "192.0.2.13", ADMIN_PASSWORD).await,
        rate_limited
    );
}

async fn a_stale_reader_password_does_not_lock_the_web_login(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_LOGIN_MAX_ATTEMPTS", "3")
            .env("TRELLIS_LOGIN_WINDOW", "3600")
            .env("TRELLIS_LOGIN_BLOCK", "300"),
    )
    .await;
    let ada = app.member("ada").await;
    app.gql(
        "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"reader-pass-2\") }",
        json!({}),
    )
    .bearer(&ada.access)
    .send()
    .await
    .data();
    let client_login = |password: &'static str| {
        let app = &app;
        async move {
            app.client
                .post(app.url("/accounts/ClientLogin"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("Email=ada&Passwd={password}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let fever = |key: &'static str| {
        let app = &app;
        async move {
            app.client
                .post(app.url("/fever/?api"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("api_key={key}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    // The phone keeps sending an old reader password, on both protocols.
    for _ in 0..3 {
        assert_eq!(client_login("reader-pass-1").await, 401);
        assert_eq!(fever("00000000000000000000000000000000").await, 200);
    }
    assert_eq!(
        client_login("reader-pass-2").await,
        429,
        "its own protocol's budget is spent"
    );
    // Fever's refusal is in the protocol's own words, with when to retry.
    let blocked = app
        .client
        .post(app.url("/fever/?api"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("api_key=00000000000000000000000000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(blocked.status(), 200);
    assert!(blocked.headers().contains_key("retry-after"));
    let body: serde_json::Value = blocked.json().await.unwrap();
    assert_eq!(body, serde_json::json!({ "api_version": 3, "auth": 0 }));
    // The web login, from the same address, is untouched.
    assert!(app.login_response("ada", "ada-password").await.data()["login"].is_object());
}

async fn reader_credentials_cannot_be_forged_from_a_database_dump(backend: Backend) {
    use hmac::Mac;
    use sea_orm::EntityTrait;
    let mut app = spawn_app(backend).await;
    let ada = app.member("ada").await;
    app.gql(
        "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"reader-pass-1\") }",
        json!({}),
    )
    .bearer(&ada.access)
    .send()
    .await
    .data();
    let client_login = |app: &TestApp, query: &str, body: &str| {
        app.client
            .post(app.url(&format!("/accounts/ClientLogin{query}")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned())
            .send()
    };
    let login = client_login(&app, "", "Email=ada&Passwd=reader-pass-1")
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let text = login.text().await.unwrap();
    let token = text
        .lines()
        .find_map(|l| l.strip_prefix("Auth="))
        .unwrap()
        .to_owned();
    let in_url = client_login(&app, "?Email=ada&Passwd=reader-pass-1", "")
        .await
        .unwrap();
    assert_eq!(
        in_url.status(),
        401,
        "the password is read from the body only"
    );

    let user_info = |app: &TestApp, token: String| {
        app.client
            .get(app.url("/reader/api/0/user-info"))
            .header("authorization", format!("GoogleLogin auth={token}"))
            .send()
    };
    assert_eq!(user_info(&app, token.clone()).await.unwrap().status(), 200);

    // What a dump holds: the credential row. Neither the old token scheme
    // (keyed by the stored hash) nor an unkeyed hash of the Fever key works.
    let row = entity::reader_credential::Entity::find()
        .one(&app.database().await)
        .await
        .unwrap()
        .unwrap();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(row.password_hash.as_bytes()).unwrap();
    mac.update(b"trellis-greader:");
    mac.update(row.user_id.as_bytes());
    let forged_tag: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let forged = format!("{}/{forged_tag}", row.user_id.simple());
    assert_eq!(user_info(&app, forged).await.unwrap().status(), 401);
    // md5("ada:reader-pass-1"), computed independently.
    let fever_key = format!("{:x}", md5::Md5::digest(b"ada:reader-pass-1"));
    use md5::Digest;
    let unkeyed: String = sha2::Sha256::digest(fever_key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_ne!(row.fever_key_hash, unkeyed);
    let fever = |app: &TestApp| {
        app.client
            .post(app.url("/fever/?api"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("api_key={fever_key}"))
            .send()
    };
    let answer: serde_json::Value = fever(&app).await.unwrap().json().await.unwrap();
    assert_eq!(answer["auth"], 1);

    // Another server secret on the same database: nothing verifies.
    app.terminate().await;
    app.restart(&[(
        "TRELLIS_JWT_SECRET",
        "another-secret-0123456789abcdef0123456789",
    )])
    .await;
    assert_eq!(user_info(&app, token).await.unwrap().status(), 401);
    let answer: serde_json::Value = fever(&app).await.unwrap().json().await.unwrap();
    assert_eq!(answer["auth"], 0);
}

async fn without_a_configured_secret_a_private_key_file_is_made(backend: Backend) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let key_file = dir.path().join("instance.key");
    let mut serve = crate::helpers::trellis_command(dir.path(), &db.url);
    serve
        .env("TRELLIS_LISTEN", "127.0.0.1:0")
        .env("TRELLIS_ADMIN_USER", ADMIN_USER)
        .env("TRELLIS_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .arg("serve");
    let app = TestApp::from_command(serve, db, dir).await;
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let tokens = app.admin().await;
    let me = app
        .gql("{ me { username } }", json!({}))
        .bearer(&tokens.access)
        .send()
        .await;
    assert_eq!(me.data()["me"]["username"], ADMIN_USER);
}
