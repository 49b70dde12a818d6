//! GraphQL over WebSocket (`graphql-transport-ws`) and its authentication.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::{
    connect_async,
    tungstenite::{Message, client::IntoClientRequest},
};

use crate::{
    helpers::{ADMIN_USER, AppOptions, Backend, TestApp, spawn_app, spawn_app_with},
    on_both_backends,
};

on_both_backends!(
    token_in_connection_init_authenticates,
    bad_token_closes_the_connection,
    cookie_authenticates_only_from_an_allowed_origin,
    message_over_the_body_limit_is_refused_with_1009,
    socket_without_connection_init_is_closed_with_4408,
    subscribe_before_the_ack_is_closed_with_4401,
    reused_subscription_id_is_closed_with_4409,
    operations_past_the_cap_are_refused_one_by_one,
    logout_closes_the_sessions_sockets_with_4403,
    password_change_closes_the_other_sessions_sockets,
    refresh_token_reuse_closes_the_sessions_sockets,
    a_session_ended_by_another_process_is_noticed_at_the_recheck,
);

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn open(app: &TestApp, headers: &[(&str, &str)]) -> Socket {
    let mut request = format!("ws://{}/graphql/ws", app.addr)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().unwrap(),
    );
    for (name, value) in headers {
        let name =
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    let (socket, response) = connect_async(request).await.expect("websocket handshake");
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "graphql-transport-ws"
    );
    socket
}

pub async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
}

/// A socket signed in with `token` (acknowledged) that has sent one
/// subscription, `id`, of `query` with `variables`.
pub async fn subscribe(
    app: &TestApp,
    token: &str,
    id: &str,
    query: &str,
    variables: Value,
) -> Socket {
    let mut socket = open(app, &[]).await;
    send(
        &mut socket,
        json!({ "type": "connection_init", "payload": { "token": token } }),
    )
    .await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "connection_ack");
    send(
        &mut socket,
        json!({ "id": id, "type": "subscribe",
                "payload": { "query": query, "variables": variables } }),
    )
    .await;
    socket
}

/// The next protocol message, or None when the server closed the socket.
pub async fn next(socket: &mut Socket) -> Option<Value> {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
            .await
            .expect("server answers")?;
        match message.ok()? {
            Message::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
            Message::Close(_) => return None,
            _ => continue,
        }
    }
}

/// Reads until the server closes the socket; its close code. Panics on
/// any protocol message first.
pub async fn close_code(socket: &mut Socket) -> u16 {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(30), socket.next())
            .await
            .expect("the server closes the socket")
            .expect("a close frame before the end of the stream")
            .expect("a clean close");
        match message {
            Message::Close(Some(frame)) => return frame.code.into(),
            Message::Close(None) => panic!("closed without a code"),
            Message::Text(text) => panic!("expected a close, got {text}"),
            _ => continue,
        }
    }
}

/// A socket whose `connection_init` with `token` was acknowledged.
async fn acknowledged(app: &TestApp, token: &str) -> Socket {
    let mut socket = open(app, &[]).await;
    send(
        &mut socket,
        json!({ "type": "connection_init", "payload": { "token": token } }),
    )
    .await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "connection_ack");
    socket
}

/// A subscription that runs until stopped, and sends nothing (no event
/// has this topic).
const EVENTS: &str = "subscription { events(topics: [\"test.never\"]) { id } }";

/// Sends `{ me { username } }` as operation "1"; the first answer.
async fn me_over_raw(socket: &mut Socket) -> Value {
    send(
        socket,
        json!({ "id": "1", "type": "subscribe", "payload": { "query": "{ me { username } }" } }),
    )
    .await;
    next(socket).await.expect("a result")
}

async fn me_over(socket: &mut Socket) -> Value {
    let answer = me_over_raw(socket).await;
    assert_eq!(answer["type"], "next", "{answer}");
    answer["payload"]["data"]["me"].clone()
}

async fn token_in_connection_init_authenticates(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let mut socket = open(&app, &[]).await;
    send(&mut socket, json!({ "type": "connection_init", "payload": { "authorization": format!("Bearer {}", tokens.access) } })).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "connection_ack");
    assert_eq!(me_over(&mut socket).await["username"], ADMIN_USER);
    assert_eq!(next(&mut socket).await.unwrap()["type"], "complete");
}

async fn bad_token_closes_the_connection(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut socket = open(&app, &[]).await;
    send(
        &mut socket,
        json!({ "type": "connection_init", "payload": { "token": "not-a-token" } }),
    )
    .await;
    assert_eq!(
        close_code(&mut socket).await,
        4403,
        "no ack for a bad token"
    );
}

async fn message_over_the_body_limit_is_refused_with_1009(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_MAX_BODY_BYTES", "16384"),
    )
    .await;
    let tokens = app.admin().await;
    let padded = |size: usize| {
        json!({ "id": "1", "type": "subscribe",
                "payload": { "query": format!("{{ me {{ username }} }}{}", " ".repeat(size)) } })
    };
    // Under the limit it runs, as over HTTP.
    let mut socket = acknowledged(&app, &tokens.access).await;
    send(&mut socket, padded(12 * 1024)).await;
    let answer = next(&mut socket).await.unwrap();
    assert_eq!(answer["payload"]["data"]["me"]["username"], ADMIN_USER);
    assert_eq!(next(&mut socket).await.unwrap()["type"], "complete");
    // Past it the socket is closed and the document never runs.
    send(&mut socket, padded(32 * 1024)).await;
    assert_eq!(close_code(&mut socket).await, 1009);
}

async fn socket_without_connection_init_is_closed_with_4408(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_WS_INIT_TIMEOUT", "1"),
    )
    .await;
    let mut socket = open(&app, &[]).await;
    // Pings do not count as initialising.
    send(&mut socket, json!({ "type": "ping" })).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "pong");
    assert_eq!(close_code(&mut socket).await, 4408);
}

async fn subscribe_before_the_ack_is_closed_with_4401(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut socket = open(&app, &[]).await;
    send(
        &mut socket,
        json!({ "id": "1", "type": "subscribe", "payload": { "query": "{ __typename }" } }),
    )
    .await;
    assert_eq!(close_code(&mut socket).await, 4401);
}

async fn reused_subscription_id_is_closed_with_4409(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let mut socket = subscribe(&app, &tokens.access, "e", EVENTS, json!({})).await;
    send(
        &mut socket,
        json!({ "id": "e", "type": "subscribe", "payload": { "query": "{ __typename }" } }),
    )
    .await;
    assert_eq!(close_code(&mut socket).await, 4409);

    // Once an operation has completed, its id may be used again.
    let mut socket = acknowledged(&app, &tokens.access).await;
    for _ in 0..2 {
        assert_eq!(me_over(&mut socket).await["username"], ADMIN_USER);
        assert_eq!(next(&mut socket).await.unwrap()["type"], "complete");
    }
}

async fn operations_past_the_cap_are_refused_one_by_one(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_WS_MAX_SUBSCRIPTIONS", "2"),
    )
    .await;
    let tokens = app.admin().await;
    let mut socket = acknowledged(&app, &tokens.access).await;
    for id in ["a", "b"] {
        send(
            &mut socket,
            json!({ "id": id, "type": "subscribe", "payload": { "query": EVENTS } }),
        )
        .await;
    }
    let refused = me_over_raw(&mut socket).await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["id"], "1");
    assert_eq!(
        refused["payload"][0]["extensions"]["code"],
        "TOO_MANY_SUBSCRIPTIONS"
    );
    // Stopping one makes room; the connection was never closed.
    send(&mut socket, json!({ "id": "a", "type": "complete" })).await;
    assert_eq!(me_over(&mut socket).await["username"], ADMIN_USER);
}

async fn cookie_authenticates_only_from_an_allowed_origin(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;

    let host = app.addr.to_string();
    let same_origin = format!("http://{host}");
    let mut socket = open(
        &app,
        &[("cookie", &tokens.cookie), ("origin", &same_origin)],
    )
    .await;
    send(&mut socket, json!({ "type": "connection_init" })).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "connection_ack");
    assert_eq!(me_over(&mut socket).await["username"], ADMIN_USER);

    let mut socket = open(
        &app,
        &[
            ("cookie", &tokens.cookie),
            ("origin", "https://evil.example"),
        ],
    )
    .await;
    send(&mut socket, json!({ "type": "connection_init" })).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "connection_ack");
    assert!(
        me_over(&mut socket).await.is_null(),
        "a foreign page must not ride the cookie"
    );
}

const LOGOUT: &str = "mutation { logout }";

async fn logout_closes_the_sessions_sockets_with_4403(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let other = app.admin().await;
    let mut socket = acknowledged(&app, &tokens.access).await;
    assert_eq!(me_over(&mut socket).await["username"], ADMIN_USER);
    assert_eq!(next(&mut socket).await.unwrap()["type"], "complete");
    // The cookie of the same session opened this one.
    let host = app.addr.to_string();
    let origin = format!("http://{host}");
    let mut by_cookie = open(&app, &[("cookie", &tokens.cookie), ("origin", &origin)]).await;
    send(&mut by_cookie, json!({ "type": "connection_init" })).await;
    assert_eq!(
        next(&mut by_cookie).await.unwrap()["type"],
        "connection_ack"
    );
    let mut other_session = acknowledged(&app, &other.access).await;

    let answer = app
        .gql(LOGOUT, json!({}))
        .bearer(&tokens.access)
        .send()
        .await;
    assert_eq!(answer.data()["logout"], true);
    assert_eq!(close_code(&mut socket).await, 4403);
    assert_eq!(close_code(&mut by_cookie).await, 4403);
    // Another session of the same user is not touched.
    assert_eq!(me_over(&mut other_session).await["username"], ADMIN_USER);
}

async fn password_change_closes_the_other_sessions_sockets(backend: Backend) {
    let app = spawn_app(backend).await;
    let kept = app.member("walt").await;
    let stolen = app.login("walt", "walt-password").await;
    let mut thief = acknowledged(&app, &stolen.access).await;
    let mut owner = acknowledged(&app, &kept.access).await;

    let answer = app
        .gql(
            "mutation($c: String!, $n: String!) { changePassword(currentPassword: $c, newPassword: $n) }",
            json!({ "c": "walt-password", "n": "walt-new-password-1" }),
        )
        .bearer(&kept.access)
        .send()
        .await;
    assert_eq!(answer.data()["changePassword"], true);
    assert_eq!(close_code(&mut thief).await, 4403);
    assert_eq!(me_over(&mut owner).await["username"], "walt");
}

async fn refresh_token_reuse_closes_the_sessions_sockets(backend: Backend) {
    let app = spawn_app(backend).await;
    let tokens = app.admin().await;
    let mut socket = acknowledged(&app, &tokens.access).await;
    let refresh = "mutation($t: String!) { refreshToken(token: $t) { accessToken } }";
    let rotated = app
        .gql(refresh, json!({ "t": tokens.refresh }))
        .send()
        .await;
    rotated.data();
    // The socket survives a normal rotation...
    assert_eq!(me_over(&mut socket).await["username"], ADMIN_USER);
    assert_eq!(next(&mut socket).await.unwrap()["type"], "complete");
    // ...but not a reuse of the spent token, which revokes the session.
    let reused = app
        .gql(refresh, json!({ "t": tokens.refresh }))
        .send()
        .await;
    assert_eq!(reused.error_code(), Some("UNAUTHENTICATED"));
    assert_eq!(close_code(&mut socket).await, 4403);
}

async fn a_session_ended_by_another_process_is_noticed_at_the_recheck(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_WS_SESSION_RECHECK", "1"),
    )
    .await;
    let tokens = app.admin().await;
    let mut socket = acknowledged(&app, &tokens.access).await;
    // The logout happens in another process: no announcement reaches this one.
    let (_sibling, sibling_addr) = app.sibling(&[("TRELLIS_ROLE", "api")]).await;
    let answer: Value = app
        .client
        .post(format!("http://{sibling_addr}/graphql"))
        .header("content-type", "application/json")
        .bearer_auth(&tokens.access)
        .body(json!({ "query": LOGOUT }).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["data"]["logout"], true, "{answer}");
    assert_eq!(close_code(&mut socket).await, 4403);
}
