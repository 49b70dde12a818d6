//! GraphQL over WebSocket: the `graphql-transport-ws` protocol as the
//! graphql-ws library defines it
//! (<https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md>).
//!
//! Ours rather than async-graphql's connection so that it keeps the
//! protocol's rules and our limits: a client that sends no
//! `connection_init` within `TRELLIS_WS_INIT_TIMEOUT` is closed with 4408,
//! a bad token with 4403, a `subscribe` before the acknowledgement with
//! 4401, a second `connection_init` with 4429, a reused subscription id
//! with 4409, a malformed message with 4400; at most
//! `TRELLIS_WS_MAX_SUBSCRIPTIONS` operations run at once on a connection
//! (one more is answered with an `error` message, `TOO_MANY_SUBSCRIPTIONS`).
//! The message size limit (`TRELLIS_MAX_BODY_BYTES`, 1009 past it) is set
//! on the upgrade (`http::graphql_ws`).
//!
//! A signed-in connection lives only as long as its session: it closes with
//! 4403 when the session ends in this process (logout, password change,
//! refresh-token reuse: `auth::revocation`) and re-checks the session every
//! `TRELLIS_WS_SESSION_RECHECK` seconds, for ends announced elsewhere.
//!
//! [`Protocol`] holds the decisions (pure, tested below); [`serve`] does the
//! I/O and runs each operation through the schema, with the connection's
//! viewer and request facts as session data and fresh loaders per operation.

use std::{collections::HashMap, sync::Arc, time::Duration};

use async_graphql::{Data, Executor, Request, Response};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::{
    SinkExt, StreamExt,
    stream::{self, AbortHandle, Abortable, BoxStream, SelectAll},
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::http::RequestData;
use crate::{
    auth::{Viewer, service::AuthService},
    error::AppError,
    http::client::RequestMeta,
};

/// The connection's limits (`TRELLIS_WS_INIT_TIMEOUT`, `TRELLIS_WS_MAX_SUBSCRIPTIONS`).
#[derive(Debug, Clone, Copy)]
pub struct WsLimits {
    pub init_timeout: Duration,
    pub max_subscriptions: usize,
    /// How often a signed-in connection re-checks its session
    /// (`TRELLIS_WS_SESSION_RECHECK`).
    pub session_recheck: Duration,
}

/// What a client may send.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    ConnectionInit {
        #[serde(default)]
        payload: Option<Value>,
    },
    Ping {
        #[serde(default)]
        payload: Option<Value>,
    },
    Pong {
        #[serde(default)]
        payload: Option<Value>,
    },
    Subscribe {
        id: String,
        payload: Box<Request>,
    },
    Complete {
        id: String,
    },
}

/// Why the server closes a connection: a WebSocket close code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    pub reason: String,
}

impl Close {
    fn new(code: u16, reason: impl Into<String>) -> Self {
        Close {
            code,
            reason: reason.into(),
        }
    }

    pub fn invalid_message(why: impl std::fmt::Display) -> Self {
        Close::new(4400, format!("invalid message: {why}"))
    }

    pub fn forbidden() -> Self {
        Close::new(4403, "Forbidden")
    }

    pub fn session_ended() -> Self {
        Close::new(4403, "Forbidden: the session has ended")
    }

    pub fn init_timeout() -> Self {
        Close::new(4408, "Connection initialisation timeout")
    }

    pub fn internal() -> Self {
        Close::new(4500, "internal error")
    }

    pub fn message_too_big() -> Self {
        Close::new(1009, "message too big")
    }
}

/// What to do with a client message.
pub enum Step {
    /// Authenticate with the `connection_init` payload, then call
    /// [`Protocol::acknowledged`] and send `connection_ack` (or close).
    Authenticate(Value),
    Pong(Option<Value>),
    /// Run an operation; its events carry `generation`.
    Start {
        id: String,
        generation: u64,
        request: Box<Request>,
    },
    /// Refuse one operation with an `error` message; the connection stays.
    Refuse {
        id: String,
        message: &'static str,
    },
    /// Stop the operation started as `generation`.
    Stop {
        generation: u64,
    },
    Close(Close),
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingInit,
    Authenticating,
    Acknowledged,
}

/// The protocol's state: the phase and the running operations by id.
pub struct Protocol {
    phase: Phase,
    running: HashMap<String, u64>,
    next_generation: u64,
    max_subscriptions: usize,
}

impl Protocol {
    pub fn new(max_subscriptions: usize) -> Self {
        Protocol {
            phase: Phase::AwaitingInit,
            running: HashMap::new(),
            next_generation: 0,
            max_subscriptions,
        }
    }

    /// Whether the init timeout still applies.
    pub fn awaiting_init(&self) -> bool {
        self.phase == Phase::AwaitingInit
    }

    /// The authentication of `connection_init` succeeded.
    pub fn acknowledged(&mut self) {
        self.phase = Phase::Acknowledged;
    }

    /// A text message from the client.
    pub fn receive_text(&mut self, text: &str) -> Step {
        match serde_json::from_str::<ClientMessage>(text) {
            Ok(message) => self.receive(message),
            Err(error) => Step::Close(Close::invalid_message(error)),
        }
    }

    pub fn receive(&mut self, message: ClientMessage) -> Step {
        match message {
            ClientMessage::ConnectionInit { payload } => {
                if self.phase != Phase::AwaitingInit {
                    return Step::Close(Close::new(4429, "Too many initialisation requests"));
                }
                self.phase = Phase::Authenticating;
                Step::Authenticate(payload.unwrap_or(Value::Null))
            }
            ClientMessage::Ping { payload } => Step::Pong(payload),
            ClientMessage::Pong { .. } => Step::Nothing,
            ClientMessage::Subscribe { id, payload } => {
                if self.phase != Phase::Acknowledged {
                    return Step::Close(Close::new(4401, "Unauthorized"));
                }
                if self.running.contains_key(&id) {
                    return Step::Close(Close::new(
                        4409,
                        format!("Subscriber for {id} already exists"),
                    ));
                }
                if self.running.len() >= self.max_subscriptions {
                    return Step::Refuse {
                        id,
                        message: "too many operations running on this connection",
                    };
                }
                let generation = self.next_generation;
                self.next_generation += 1;
                self.running.insert(id.clone(), generation);
                Step::Start {
                    id,
                    generation,
                    request: payload,
                }
            }
            ClientMessage::Complete { id } => match self.running.remove(&id) {
                Some(generation) => Step::Stop { generation },
                None => Step::Nothing,
            },
        }
    }

    /// Operation `generation` under `id` ended by itself; true when it is
    /// still the current one (so the client is told `complete`), false when
    /// the client had stopped it already.
    pub fn finished(&mut self, id: &str, generation: u64) -> bool {
        if self.is_current(id, generation) {
            self.running.remove(id);
            true
        } else {
            false
        }
    }

    /// Whether events of operation `generation` under `id` still go out.
    pub fn is_current(&self, id: &str, generation: u64) -> bool {
        self.running.get(id) == Some(&generation)
    }
}

/// One operation's output: a result, or `None` when it has ended.
struct Event {
    id: String,
    generation: u64,
    response: Option<Response>,
}

/// Who the connection is for, decided at the upgrade.
pub struct Upgrade<E> {
    pub schema: E,
    pub auth: Arc<AuthService>,
    /// Each operation's services and fresh loaders.
    pub request_data: RequestData,
    pub meta: RequestMeta,
    /// The session cookie's viewer when the page's origin is allowed.
    pub cookie_viewer: Option<Viewer>,
    pub limits: WsLimits,
}

/// Runs one connection until either side closes it.
pub async fn serve<E: Executor>(socket: WebSocket, upgrade: Upgrade<E>) {
    let Upgrade {
        schema,
        auth,
        request_data,
        meta,
        cookie_viewer,
        limits,
    } = upgrade;
    let (mut sink, mut incoming) = socket.split();
    let mut protocol = Protocol::new(limits.max_subscriptions);
    let mut operations: SelectAll<BoxStream<'static, Event>> = SelectAll::new();
    let mut aborts: HashMap<u64, AbortHandle> = HashMap::new();
    let mut session: Option<Arc<Data>> = None;
    let init_deadline = tokio::time::sleep(limits.init_timeout);
    tokio::pin!(init_deadline);
    // Subscribed before authenticating, so no end between the two is missed.
    let mut revoked = auth.revocations().subscribe();
    let mut signed_in: Option<Viewer> = None;
    let mut recheck = tokio::time::interval_at(
        tokio::time::Instant::now() + limits.session_recheck,
        limits.session_recheck,
    );
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let close = loop {
        let step = tokio::select! {
            message = incoming.next() => match message {
                None | Some(Ok(Message::Close(_))) => break None,
                Some(Ok(Message::Text(text))) => protocol.receive_text(text.as_str()),
                Some(Ok(Message::Binary(_))) => {
                    Step::Close(Close::invalid_message("the protocol's messages are text"))
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Err(error)) => break Some(receive_error(&error)),
            },
            Some(event) = operations.next() => {
                let text = match event.response {
                    Some(response) if protocol.is_current(&event.id, event.generation) => {
                        json!({ "id": event.id, "type": "next", "payload": response })
                    }
                    Some(_) => continue,
                    None => {
                        aborts.remove(&event.generation);
                        if !protocol.finished(&event.id, event.generation) {
                            continue;
                        }
                        json!({ "id": event.id, "type": "complete" })
                    }
                };
                if sink.send(Message::Text(text.to_string().into())).await.is_err() {
                    break None;
                }
                continue;
            }
            () = &mut init_deadline, if protocol.awaiting_init() => Step::Close(Close::init_timeout()),
            ended = revoked.recv(), if signed_in.is_some() => {
                let Some(viewer) = &signed_in else { continue };
                match ended {
                    Ok(ended) if ended.ends(viewer) => Step::Close(Close::session_ended()),
                    Ok(_) | Err(RecvError::Closed) => continue,
                    // Missed announcements: ask the database.
                    Err(RecvError::Lagged(_)) => session_step(&auth, viewer).await,
                }
            }
            _ = recheck.tick(), if signed_in.is_some() => {
                let Some(viewer) = &signed_in else { continue };
                session_step(&auth, viewer).await
            }
        };
        let reply = match step {
            Step::Authenticate(payload) => {
                match authenticate(&auth, &payload, cookie_viewer.clone()).await {
                    Ok(viewer) => {
                        let mut data = Data::default();
                        data.insert(meta.clone());
                        if let Some(viewer) = viewer {
                            data.insert::<Viewer>(viewer.clone());
                            signed_in = Some(viewer);
                        }
                        session = Some(Arc::new(data));
                        protocol.acknowledged();
                        json!({ "type": "connection_ack" })
                    }
                    Err(close) => break Some(close),
                }
            }
            Step::Pong(payload) => match payload {
                Some(payload) => json!({ "type": "pong", "payload": payload }),
                None => json!({ "type": "pong" }),
            },
            Step::Start {
                id,
                generation,
                request,
            } => {
                let Some(session) = session.clone() else {
                    // The protocol starts operations only after the ack.
                    break Some(Close::internal());
                };
                let mut request = *request;
                request_data(&mut request.data);
                let (abort, registration) = AbortHandle::new_pair();
                aborts.insert(generation, abort);
                let results = schema.execute_stream(request, Some(session));
                let next_id = id.clone();
                let events = Abortable::new(results, registration)
                    .map(move |response| Event {
                        id: next_id.clone(),
                        generation,
                        response: Some(response),
                    })
                    .chain(stream::once(async move {
                        Event {
                            id,
                            generation,
                            response: None,
                        }
                    }));
                operations.push(events.boxed());
                continue;
            }
            Step::Refuse { id, message } => json!({
                "id": id,
                "type": "error",
                "payload": [{ "message": message, "extensions": { "code": "TOO_MANY_SUBSCRIPTIONS" } }],
            }),
            Step::Stop { generation } => {
                if let Some(abort) = aborts.remove(&generation) {
                    abort.abort();
                }
                continue;
            }
            Step::Close(close) => break Some(close),
            Step::Nothing => continue,
        };
        if sink
            .send(Message::Text(reply.to_string().into()))
            .await
            .is_err()
        {
            break None;
        }
    };
    for abort in aborts.into_values() {
        abort.abort();
    }
    if let Some(Close { code, reason }) = close {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = sink.send(Message::Close(Some(frame))).await;
    }
}

/// Closes the connection when the viewer's session is no longer live.
async fn session_step(auth: &AuthService, viewer: &Viewer) -> Step {
    match auth.session_is_live(viewer).await {
        Ok(true) => Step::Nothing,
        Ok(false) => Step::Close(Close::session_ended()),
        Err(error) => {
            // Keep the connection; the next re-check asks again.
            tracing::warn!(error = ?error, "re-checking a WebSocket connection's session");
            Step::Nothing
        }
    }
}

/// The viewer for a `connection_init` payload: its token's, else the
/// cookie's (already checked against the origin), else anonymous.
async fn authenticate(
    auth: &AuthService,
    payload: &Value,
    cookie_viewer: Option<Viewer>,
) -> Result<Option<Viewer>, Close> {
    let Some(token) = connection_token(payload) else {
        return Ok(cookie_viewer);
    };
    match auth.authenticate_bearer(&token).await {
        Ok(viewer) => Ok(Some(viewer)),
        Err(AppError::Unauthenticated(_)) => Err(Close::forbidden()),
        Err(error) => {
            tracing::error!(error = ?error, "authenticating a WebSocket connection");
            Err(Close::internal())
        }
    }
}

/// How a failed read ends the connection: 1009 for a message over the
/// size limit, 1002 for anything else the client did wrong.
fn receive_error(error: &axum::Error) -> Close {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(tungstenite::Error::Capacity(_)) = current.downcast_ref::<tungstenite::Error>()
        {
            return Close::message_too_big();
        }
        source = current.source();
    }
    tracing::debug!(error = %error, "WebSocket read failed");
    Close::new(1002, "protocol error")
}

/// The access token from a `connection_init` payload, in the shapes
/// clients commonly send.
pub fn connection_token(payload: &Value) -> Option<String> {
    ["authorization", "Authorization", "authToken", "token"]
        .iter()
        .find_map(|key| payload.get(key)?.as_str())
        .map(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .unwrap_or(value)
                .trim()
                .to_owned()
        })
        .filter(|token| !token.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscribe(id: &str) -> ClientMessage {
        ClientMessage::Subscribe {
            id: id.to_owned(),
            payload: Box::new(Request::new("{ __typename }")),
        }
    }

    fn acknowledged(max_subscriptions: usize) -> Protocol {
        let mut protocol = Protocol::new(max_subscriptions);
        assert!(matches!(
            protocol.receive_text(r#"{"type":"connection_init"}"#),
            Step::Authenticate(Value::Null)
        ));
        protocol.acknowledged();
        protocol
    }

    fn closed_with(step: Step) -> u16 {
        match step {
            Step::Close(close) => close.code,
            _ => panic!("expected a close"),
        }
    }

    #[test]
    fn connection_init_token_shapes() {
        assert_eq!(
            connection_token(&json!({"authorization": "Bearer abc"})).as_deref(),
            Some("abc")
        );
        assert_eq!(
            connection_token(&json!({"token": "abc"})).as_deref(),
            Some("abc")
        );
        assert_eq!(connection_token(&json!({})), None);
        assert_eq!(connection_token(&Value::Null), None);
    }

    #[test]
    fn subscribe_before_the_ack_is_unauthorized() {
        let mut protocol = Protocol::new(10);
        assert_eq!(closed_with(protocol.receive(subscribe("1"))), 4401);
        let mut protocol = Protocol::new(10);
        let _ = protocol.receive_text(r#"{"type":"connection_init","payload":{}}"#);
        assert!(!protocol.awaiting_init());
        assert_eq!(closed_with(protocol.receive(subscribe("1"))), 4401);
    }

    #[test]
    fn a_second_init_is_refused() {
        let mut protocol = acknowledged(10);
        assert_eq!(
            closed_with(protocol.receive_text(r#"{"type":"connection_init"}"#)),
            4429
        );
    }

    #[test]
    fn a_running_id_cannot_be_reused_until_it_ends() {
        let mut protocol = acknowledged(10);
        assert!(matches!(
            protocol.receive(subscribe("a")),
            Step::Start { .. }
        ));
        assert_eq!(closed_with(protocol.receive(subscribe("a"))), 4409);

        let mut protocol = acknowledged(10);
        let Step::Start {
            generation: first, ..
        } = protocol.receive(subscribe("a"))
        else {
            panic!("started");
        };
        assert!(protocol.finished("a", first));
        assert!(matches!(
            protocol.receive(subscribe("a")),
            Step::Start { .. }
        ));
        assert!(!protocol.is_current("a", first));
    }

    #[test]
    fn a_stopped_operation_stays_silent_even_when_its_id_is_reused() {
        let mut protocol = acknowledged(10);
        let Step::Start {
            generation: old, ..
        } = protocol.receive(subscribe("a"))
        else {
            panic!("started");
        };
        assert!(matches!(
            protocol.receive_text(r#"{"type":"complete","id":"a"}"#),
            Step::Stop { generation } if generation == old
        ));
        let Step::Start {
            generation: new, ..
        } = protocol.receive(subscribe("a"))
        else {
            panic!("restarted");
        };
        assert!(!protocol.is_current("a", old));
        assert!(
            !protocol.finished("a", old),
            "the old run's end is not the new one's"
        );
        assert!(protocol.is_current("a", new));
        assert!(matches!(
            protocol.receive_text(r#"{"type":"complete","id":"unknown"}"#),
            Step::Nothing
        ));
    }

    #[test]
    fn operations_past_the_cap_are_refused_one_by_one() {
        let mut protocol = acknowledged(2);
        assert!(matches!(
            protocol.receive(subscribe("1")),
            Step::Start { .. }
        ));
        assert!(matches!(
            protocol.receive(subscribe("2")),
            Step::Start { .. }
        ));
        assert!(matches!(protocol.receive(subscribe("3")), Step::Refuse { id, .. } if id == "3"));
        let _ = protocol.receive_text(r#"{"type":"complete","id":"1"}"#);
        assert!(matches!(
            protocol.receive(subscribe("3")),
            Step::Start { .. }
        ));
    }

    #[test]
    fn malformed_messages_close_with_4400() {
        for text in [
            "not json",
            r#"{"type":"start_everything"}"#,
            r#"{"type":"subscribe","id":"1"}"#,
            r#"{"id":"1"}"#,
        ] {
            assert_eq!(
                closed_with(acknowledged(1).receive_text(text)),
                4400,
                "{text}"
            );
        }
        assert!(matches!(
            acknowledged(1).receive_text(r#"{"type":"ping","payload":{"t":1}}"#),
            Step::Pong(Some(_))
        ));
    }
}
