//! Slow and greedy clients (issue 16, item 8): a client that never finishes
//! its headers is closed after `TRELLIS_HEADER_READ_TIMEOUT`, and past
//! `TRELLIS_MAX_CONNECTIONS` a new connection is answered 503 and closed.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    helpers::{AppOptions, Backend, spawn_app_with},
    on_both_backends,
};

on_both_backends!(
    half_sent_request_is_closed_after_the_header_timeout,
    connection_past_the_cap_is_refused_until_one_closes,
);

/// A bound on waiting for the server, so a server that never closes fails
/// the test instead of hanging it; not a measurement.
const GUARD: Duration = Duration::from_secs(30);

/// Everything the server sends until it closes the connection.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut received))
        .await
        .expect("the server closes the connection")
        .expect("the connection ends cleanly (no reset)");
    received
}

/// Sends `GET /healthz` and reads one response, leaving the connection open.
async fn healthz_status(stream: &mut TcpStream) -> u16 {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(GUARD, async {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let read = stream.read(&mut byte).await.unwrap();
            assert_eq!(read, 1, "the server closed the connection mid-response");
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().unwrap())
            })
            .expect("a content-length");
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await.unwrap();
        head[9..12].parse().unwrap()
    })
    .await
    .expect("the server answers")
}

async fn half_sent_request_is_closed_after_the_header_timeout(backend: Backend) {
    let mut app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_HEADER_READ_TIMEOUT", "1"),
    )
    .await;

    let mut half_sent = TcpStream::connect(app.addr).await.unwrap();
    half_sent
        .write_all(b"POST /graphql HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    assert_eq!(read_until_closed(&mut half_sent).await, b"");

    // A connection that never sends a byte, and one kept alive after a
    // request, are closed the same way.
    let mut silent = TcpStream::connect(app.addr).await.unwrap();
    assert_eq!(read_until_closed(&mut silent).await, b"");
    let mut kept_alive = TcpStream::connect(app.addr).await.unwrap();
    assert_eq!(healthz_status(&mut kept_alive).await, 200);
    assert_eq!(read_until_closed(&mut kept_alive).await, b"");

    app.assert_serving().await;
}

async fn connection_past_the_cap_is_refused_until_one_closes(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_MAX_CONNECTIONS", "2"),
    )
    .await;
    let mut first = TcpStream::connect(app.addr).await.unwrap();
    let mut second = TcpStream::connect(app.addr).await.unwrap();
    // Answered: both hold a slot.
    assert_eq!(healthz_status(&mut first).await, 200);
    assert_eq!(healthz_status(&mut second).await, 200);

    let mut third = TcpStream::connect(app.addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let refused = String::from_utf8(read_until_closed(&mut third).await).unwrap();
    assert!(
        refused.starts_with("HTTP/1.1 503 "),
        "over the cap: {refused}"
    );
    let body: serde_json::Value =
        serde_json::from_str(refused.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "UNAVAILABLE");

    // The server closes `first` after this request; by then its slot is free.
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let last = String::from_utf8(read_until_closed(&mut first).await).unwrap();
    assert!(last.starts_with("HTTP/1.1 200 "), "{last}");
    let mut fourth = TcpStream::connect(app.addr).await.unwrap();
    assert_eq!(healthz_status(&mut fourth).await, 200);
    // `second` was never disturbed.
    assert_eq!(healthz_status(&mut second).await, 200);
}
