//! The HTTP + WebSocket server (axum).
//!
//! | path | answer |
//! |---|---|
//! | `GET /` , `/app.js`, `/style.css` | the page (embedded in the binary) |
//! | `GET /ws` | the WebSocket ([`crate::wire`]) |
//! | `GET /api/state` | [`HubStats`](crate::HubStats) as JSON |
//! | `GET /api/object/{id}` | the last tick's object `n3.17` as JSON: 400 for a bad id, 404 if absent |
//! | `GET /api/play` | whether the Join button works here, and where players go (JSON) |
//! | `GET /play` | a player's WebSocket ([`crate::play`]): 404 when joining is off, 503 beyond [`crate::play::PlayConfig::max_sessions`] |
//! | anything else | 404 with a plain-text message |
//!
//! Every request passes a guard first: a URI longer than [`MAX_URI`] gets 414, a declared
//! body longer than [`MAX_BODY`] gets 413 and a body without a declared length 411 (no
//! route reads bodies; the limits exist so that none ever can be made to buffer one).
//! Requests HTTP cannot parse get hyper's 400, a WebSocket request without the upgrade
//! headers axum's 400. Browsers beyond [`crate::HubConfig::max_clients`] get 503.
//!
//! A browser whose socket does not take a message within [`SEND_TIMEOUT`] is disconnected;
//! until then the hub drops its frames (never waits for it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use worldmesh_core::ObjectId;

use crate::assets;
use crate::hub::{Hub, Published, Subscription};
use crate::play::{MAX_PLAY_MESSAGE, Play, PlayMsg, PlaySession, RateLimit};
use crate::wire::{ClientMsg, ClientMsgError, MAX_CLIENT_MESSAGE, parse_object_id};

/// Longest request URI (path and query), bytes.
pub const MAX_URI: usize = 2048;
/// Largest declared request body, bytes.
pub const MAX_BODY: u64 = 16 * 1024;
/// Longest wait for a browser's socket to take one message before disconnecting it.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(20);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The server thread or its runtime could not start.
    #[error("cannot start the dashboard server: {0}")]
    Start(std::io::Error),
}

/// The router serving `hub` (joining off).
pub fn router(hub: Arc<Hub>) -> Router {
    router_with_play(hub, None)
}

/// The router serving `hub`, and with `play` the Join button's `/play`.
pub fn router_with_play(hub: Arc<Hub>, play: Option<Play>) -> Router {
    let play_routes: Router<Arc<Hub>> = Router::new()
        .route("/play", get(play_ws))
        .route("/api/play", get(api_play))
        .with_state(play);
    Router::new()
        .merge(play_routes)
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/style.css", get(style_css))
        .route("/ws", get(ws))
        .route("/api/state", get(api_state))
        .route("/api/object/{id}", get(api_object))
        .fallback(not_found)
        .layer(middleware::from_fn(guard))
        .with_state(hub)
}

/// Serves `hub` on `listener` until the future is dropped.
pub async fn serve(listener: tokio::net::TcpListener, hub: Arc<Hub>) -> std::io::Result<()> {
    axum::serve(listener, router(hub)).await
}

/// [`serve`] with the Join button's `/play` through `play`.
pub async fn serve_with_play(
    listener: tokio::net::TcpListener,
    hub: Arc<Hub>,
    play: Option<Play>,
) -> std::io::Result<()> {
    axum::serve(listener, router_with_play(hub, play)).await
}

/// A server running on its own thread (with its own single-threaded runtime), so a
/// producer that is not async (the simulator) can use it. Stopped when dropped.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl ServerHandle {
    /// The address it listens on (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Blocks until the server stops by itself (it does not, short of an I/O error).
    pub fn wait(mut self) -> std::io::Result<()> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("the dashboard server thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds `addr` and serves `hub` on a new thread.
pub fn spawn(addr: SocketAddr, hub: Arc<Hub>) -> Result<ServerHandle, ServeError> {
    spawn_with_play(addr, hub, None)
}

/// [`spawn`] with the Join button's `/play` through `play`.
pub fn spawn_with_play(
    addr: SocketAddr,
    hub: Arc<Hub>,
    play: Option<Play>,
) -> Result<ServerHandle, ServeError> {
    let listener = std::net::TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(ServeError::Start)?;
    let local = listener.local_addr().map_err(ServeError::Start)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("dashboard".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                tokio::select! {
                    r = serve_with_play(listener, hub, play) => r,
                    _ = stop_rx => Ok(()),
                }
            })
        })
        .map_err(ServeError::Start)?;
    Ok(ServerHandle {
        addr: local,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

fn text(status: StatusCode, msg: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg + "\n",
    )
        .into_response()
}

fn json(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn json_error(status: StatusCode, msg: &str) -> Response {
    json(status, serde_json::json!({ "error": msg }).to_string())
}

/// Refuses oversize URIs and bodies before any route sees the request.
async fn guard(req: Request, next: Next) -> Response {
    let uri_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri_len > MAX_URI {
        return text(
            StatusCode::URI_TOO_LONG,
            format!("request URI of {uri_len} bytes exceeds the limit of {MAX_URI}"),
        );
    }
    if let Some(v) = req.headers().get(header::CONTENT_LENGTH) {
        match v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            None => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("Content-Length {v:?} is not a number"),
                );
            }
            Some(n) if n > MAX_BODY => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body of {n} bytes exceeds the limit of {MAX_BODY}"),
                );
            }
            Some(_) => {}
        }
    } else if req.headers().contains_key(header::TRANSFER_ENCODING) {
        return text(
            StatusCode::LENGTH_REQUIRED,
            "request bodies must declare their Content-Length".into(),
        );
    }
    let mut res = next.run(req).await;
    res.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", assets::INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", assets::APP_JS)
}

async fn style_css() -> Response {
    asset("text/css; charset=utf-8", assets::STYLE_CSS)
}

async fn not_found(req: Request) -> Response {
    let path: String = req.uri().path().chars().take(200).collect();
    text(
        StatusCode::NOT_FOUND,
        format!("no such page: {path} (the dashboard is at /)"),
    )
}

async fn api_state(State(hub): State<Arc<Hub>>) -> Response {
    match serde_json::to_string(&hub.stats()) {
        Ok(s) => json(StatusCode::OK, s),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

async fn api_object(State(hub): State<Arc<Hub>>, Path(id): Path<String>) -> Response {
    let id = match parse_object_id(&id) {
        Ok(id) => id,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e),
    };
    match hub.object(id) {
        None => json_error(StatusCode::NOT_FOUND, &format!("no object {id} in the last tick")),
        Some((kind, owner, x, y, aoi)) => json(
            StatusCode::OK,
            serde_json::json!({
                "id": id.to_string(),
                "kind": kind,
                "kind_name": hub.world().kinds.get(usize::from(kind)).map(|k| k.name.as_str()),
                "owner": owner.0,
                "x": x,
                "y": y,
                "aoi": aoi,
            })
            .to_string(),
        ),
    }
}

async fn ws(State(hub): State<Arc<Hub>>, upgrade: WebSocketUpgrade) -> Response {
    let sub = match hub.subscribe() {
        Ok(s) => s,
        Err(e) => return text(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    upgrade
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| client_loop(socket, hub, sub))
}

/// Sends one message, counting it; `Err` when the browser is gone or too slow.
async fn send(socket: &mut WebSocket, hub: &Hub, msg: Message) -> Result<(), ()> {
    let len = match &msg {
        Message::Binary(b) => b.len(),
        Message::Text(t) => t.len(),
        _ => 0,
    };
    match tokio::time::timeout(SEND_TIMEOUT, socket.send(msg)).await {
        Ok(Ok(())) => {
            hub.ws_messages.fetch_add(1, Ordering::Relaxed);
            hub.ws_bytes.fetch_add(len as u64, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(()),
    }
}

/// Sends frame `p` (a delta if the browser has `p.seq - 1`, else a key) and the focus.
async fn send_frame(
    socket: &mut WebSocket,
    hub: &Hub,
    p: &Arc<Published>,
    last: &mut Option<u32>,
    focus: Option<ObjectId>,
) -> Result<(), ()> {
    let follows = last.map(|s| s.wrapping_add(1)) == Some(p.seq);
    let bytes = match (&p.delta, follows) {
        (Some(d), true) => d.clone(),
        _ => {
            hub.key_frames.fetch_add(1, Ordering::Relaxed);
            p.key()
        }
    };
    send(socket, hub, Message::Binary(bytes)).await?;
    *last = Some(p.seq);
    if let Some(id) = focus {
        send(socket, hub, Message::Binary(p.focus(id, hub.quantizer()).into())).await?;
    }
    Ok(())
}

async fn refuse(socket: &mut WebSocket, hub: &Hub, e: &ClientMsgError) -> Result<(), ()> {
    hub.refused_messages.fetch_add(1, Ordering::Relaxed);
    let msg = serde_json::json!({ "type": "error", "error": e.to_string() }).to_string();
    send(socket, hub, Message::Text(msg.into())).await
}

async fn client_loop(mut socket: WebSocket, hub: Arc<Hub>, mut sub: Subscription) {
    let hello = std::mem::take(&mut sub.hello);
    if send(&mut socket, &hub, Message::Text(hello.into()))
        .await
        .is_err()
    {
        return;
    }
    let mut last = None;
    let mut focus: Option<ObjectId> = None;
    let mut current = sub.latest.take();
    if let Some(p) = &current
        && send_frame(&mut socket, &hub, p, &mut last, focus).await.is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            p = sub.rx.recv() => {
                let Some(p) = p else { break };
                if send_frame(&mut socket, &hub, &p, &mut last, focus).await.is_err() {
                    break;
                }
                current = Some(p);
            }
            m = socket.recv() => match m {
                Some(Ok(Message::Text(t))) => match ClientMsg::parse(t.as_str()) {
                    Ok(ClientMsg::Hover(h)) => {
                        focus = h;
                        if let (Some(id), Some(p)) = (focus, &current) {
                            let f = p.focus(id, hub.quantizer());
                            if send(&mut socket, &hub, Message::Binary(f.into())).await.is_err() {
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        if refuse(&mut socket, &hub, &e).await.is_err() {
                            break;
                        }
                    }
                },
                Some(Ok(Message::Binary(_))) => {
                    if refuse(&mut socket, &hub, &ClientMsgError::Binary).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => {} // pings are answered by the socket itself
                Some(Err(e)) => {
                    // Oversize messages end here (the socket enforces MAX_CLIENT_MESSAGE).
                    hub.refused_messages.fetch_add(1, Ordering::Relaxed);
                    let reason: String = e.to_string().chars().take(100).collect();
                    let code = if reason.contains("too long") || reason.contains("limit") {
                        1009
                    } else {
                        1002
                    };
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))),
                    )
                    .await;
                    break;
                }
            }
        }
    }
}

async fn api_play(State(play): State<Option<Play>>) -> Response {
    let body = match &play {
        Some(p) => serde_json::json!({
            "available": true,
            "about": p.gateway.describe(),
            "max_sessions": p.config.max_sessions,
            "open": p.config.max_sessions - p.sessions.available_permits(),
            "dropped_messages": p.dropped(),
        }),
        None => serde_json::json!({
            "available": false,
            "about": "joining needs a real cluster with player ports: `worldmesh cluster --dashboard ADDR`, or `worldmesh dashboard --cluster ... --ca ... --player-key ... --player-ports ...`",
        }),
    };
    json(StatusCode::OK, body.to_string())
}

async fn play_ws(
    State(play): State<Option<Play>>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Some(play) = play else {
        return text(
            StatusCode::NOT_FOUND,
            "joining is off on this dashboard (see GET /api/play)".into(),
        );
    };
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(r) => return r.into_response(),
    };
    let Ok(permit) = Arc::clone(&play.sessions).try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the dashboard already has {} players, its limit",
                play.config.max_sessions
            ),
        );
    };
    let session = match play.gateway.open() {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("cannot start a session: {e}")),
    };
    upgrade
        .max_message_size(MAX_PLAY_MESSAGE)
        .max_frame_size(MAX_PLAY_MESSAGE)
        .on_upgrade(move |socket| async move {
            play_loop(socket, play, session).await;
            drop(permit);
        })
}

async fn send_json(socket: &mut WebSocket, v: String) -> Result<(), ()> {
    match tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(v.into()))).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}

/// One player's socket: keys to the session (rate-limited), updates to the page. Ends (and
/// the player leaves) when either side goes.
async fn play_loop(mut socket: WebSocket, play: Play, mut session: PlaySession) {
    let origin = tokio::time::Instant::now();
    let secs = || origin.elapsed().as_secs_f64();
    let mut limit = RateLimit::new(
        play.config.max_messages_per_s,
        play.config.max_messages_per_s,
        0.0,
    );
    let mut warned_at = f64::NEG_INFINITY;
    loop {
        tokio::select! {
            u = session.updates.recv() => {
                let Some(u) = u else { break };
                let ended = matches!(u, crate::play::PlayUpdate::Ended { .. });
                let v = serde_json::to_string(&u).unwrap_or_default();
                if send_json(&mut socket, v).await.is_err() || ended {
                    break;
                }
            }
            m = socket.recv() => match m {
                Some(Ok(Message::Text(t))) => match PlayMsg::parse(t.as_str()) {
                    Ok(PlayMsg::Keys { dx, dy }) => {
                        if limit.allow(secs()) {
                            // The session takes the latest direction; a full queue drops it.
                            let _ = session.keys.try_send((dx, dy));
                        } else {
                            play.dropped.fetch_add(1, Ordering::Relaxed);
                            if secs() - warned_at >= 1.0 {
                                warned_at = secs();
                                let e = format!("more than {} messages a second: dropped", play.config.max_messages_per_s);
                                if send_json(&mut socket, serde_json::json!({"type": "error", "error": e}).to_string()).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    Ok(PlayMsg::Leave) => break,
                    Err(e) => {
                        let e = serde_json::json!({"type": "error", "error": e.to_string()}).to_string();
                        if send_json(&mut socket, e).await.is_err() {
                            break;
                        }
                    }
                },
                Some(Ok(Message::Binary(_))) => {
                    let e = serde_json::json!({"type": "error", "error": "binary messages are not accepted"}).to_string();
                    if send_json(&mut socket, e).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
    }
    // Dropping the session's key sender ends it: the player leaves the node.
    drop(session);
    let _ = tokio::time::timeout(Duration::from_secs(1), socket.send(Message::Close(None))).await;
}
