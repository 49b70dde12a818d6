//! GraphQL over WebSocket (`graphql-transport-ws`) and its authentication.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::{
    connect_async,
    tungstenite::{Message, client::IntoClientRequest},
};

use crate::{
    helpers::{ADMIN_USER, Backend, TestApp, spawn_app},
    on_both_backends,
};

on_both_backends!(
    token_in_connection_init_authenticates,
    bad_token_closes_the_connection,
    cookie_authenticates_only_from_an_allowed_origin,
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

async fn me_over(socket: &mut Socket) -> Value {
    send(
        socket,
        json!({ "id": "1", "type": "subscribe", "payload": { "query": "{ me { username } }" } }),
    )
    .await;
    let answer = next(socket).await.expect("a result");
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
    assert_eq!(next(&mut socket).await, None, "no ack for a bad token");
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
