//! The HTTP listener: HTTP/1.1 with upgrades (the WebSocket), bounded so
//! that slow or idle clients cannot hold the server's sockets.
//!
//! - A client has `TRELLIS_HEADER_READ_TIMEOUT` seconds to send a request's
//!   headers, the first request's and every later one's on a kept-alive
//!   connection; then the connection is closed. (The body and the handler
//!   are bounded by `TRELLIS_REQUEST_TIMEOUT` in the router.)
//! - At most `TRELLIS_MAX_CONNECTIONS` connections are open at once,
//!   upgraded WebSockets included. One more is answered `503` with a JSON
//!   error (`UNAVAILABLE`) and closed at once, so a load balancer can retry
//!   elsewhere and a flood cannot exhaust file descriptors; a few such
//!   answers are in flight at a time, beyond them the socket is just closed.
//!
//! axum's own `serve` sets neither limit, hence this loop; it keeps
//! axum's graceful shutdown (stop accepting, let open connections finish
//! their requests).

use std::{
    io,
    net::SocketAddr,
    pin::{Pin, pin},
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::{Router, body::Body, extract::ConnectInfo, serve::Listener};
use hyper::{body::Incoming, server::conn::http1};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore, watch},
};
use tower::ServiceExt;

/// The listener's limits (`TRELLIS_HEADER_READ_TIMEOUT`, `TRELLIS_MAX_CONNECTIONS`).
#[derive(Debug, Clone, Copy)]
pub struct ListenerLimits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
}

/// Refusals (`503` answers) in flight at once; past them a connection
/// over the cap is closed without an answer.
const REFUSALS_IN_FLIGHT: usize = 64;
/// How long a refused client gets to read its `503`.
const REFUSAL_LINGER: Duration = Duration::from_secs(2);

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting and waits for the open connections to finish their requests.
pub async fn serve(
    mut listener: TcpListener,
    router: Router,
    limits: ListenerLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let open = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let refusals = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let busy = Arc::<[u8]>::from(busy_response().into_bytes());
    // Every connection task holds a receiver: `closed()` says all are done.
    let (done_tx, done_rx) = watch::channel(());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            // axum's accept: retries, and backs off on errors such as EMFILE.
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        match open.clone().try_acquire_owned() {
            Ok(slot) => {
                metrics::gauge!("trellis_http_connections_open").increment(1.0);
                let io = Counted {
                    slot: Some(slot),
                    stream,
                };
                tokio::spawn(connection(
                    io,
                    peer,
                    router.clone(),
                    limits.header_read_timeout,
                    stop_rx.clone(),
                    done_rx.clone(),
                ));
            }
            Err(_) => refuse(stream, &refusals, busy.clone()),
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

async fn connection(
    io: Counted,
    peer: SocketAddr,
    router: Router,
    header_read_timeout: Duration,
    mut stop: watch::Receiver<bool>,
    _done: watch::Receiver<()>,
) {
    let service = router.map_request(move |mut request: axum::http::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request.map(Body::new)
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let connection = builder
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
        .with_upgrades();
    let mut connection = pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = async { stop.wait_for(|stop| *stop).await.map(|_| ()) } => {
            // Finish the request in flight, then close.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(peer = %peer, error = %error, "connection ended with an error");
    }
}

/// Answers a connection over the cap with `503` and closes it, without
/// holding up the accept loop.
fn refuse(stream: TcpStream, refusals: &Arc<Semaphore>, busy: Arc<[u8]>) {
    metrics::counter!("trellis_http_connections_refused_total").increment(1);
    let Ok(refusal) = refusals.clone().try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        let _refusal = refusal;
        let mut stream = stream;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            stream.write_all(&busy).await?;
            stream.shutdown().await?;
            // Read what the client sent until it closes: closing a socket
            // with unread input resets it, and the client could lose the 503.
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<_, io::Error>(())
        })
        .await;
    });
}

fn busy_response() -> String {
    let body = serde_json::json!({ "errors": [{
        "message": "the server has too many open connections; retry shortly",
        "extensions": { "code": "UNAVAILABLE" },
    }] })
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A connection holding one of the `TRELLIS_MAX_CONNECTIONS` slots. The
/// slot is given back before the socket closes (in `poll_shutdown`, or in
/// `drop`, which runs before the stream's), so a client that has seen the
/// server close its connection finds the slot free.
struct Counted {
    slot: Option<OwnedSemaphorePermit>,
    stream: TcpStream,
}

impl Counted {
    fn release(&mut self) {
        if self.slot.take().is_some() {
            metrics::gauge!("trellis_http_connections_open").decrement(1.0);
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.release();
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.release();
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
