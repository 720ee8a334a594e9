//! # worldmesh-dashboard
//!
//! The live dashboard (issue 17): a web page that shows a distributed world at a glance —
//! every object on the map coloured by the node that owns it, areas of interest on hover,
//! migrations as they happen, a live node table, time series of bandwidth and missing
//! replicas. One HTTP + WebSocket server (axum), the page embedded in the binary (no build
//! step, no CDN).
//!
//! Producers push; the dashboard never reaches into them. A producer builds a
//! [`WorldInfo`] once and a [`Tick`] per frame (the simulator with [`Observer`], which
//! reads node state machines; a real node will report its own primaries and counters the
//! same way) and calls [`Hub::publish`], which never blocks.
//!
//! - [`model`]: what producers report;
//! - [`observe`]: ticks from `worldmesh_node::Node`s (missing replicas with a global view);
//! - [`hub`]: encoding once per tick, ownership-change detection, rates, history, and the
//!   bounded per-browser queues that drop frames for slow browsers;
//! - [`wire`]: the compact binary protocol (key and delta frames) and its Rust decoder;
//! - [`server`]: routes, request limits and the WebSocket loops;
//! - [`play`]: the Join button — the dashboard as a gateway running real client sessions;
//! - [`cluster`]: the producer for a real cluster — scrapes every node's view
//!   (`worldmesh_net::view`) and merges them into ticks;
//! - [`synthetic`]: a cheap synthetic producer for measurements at thousands of objects;
//! - [`assets`]: the page (`assets/index.html`, `app.js`, `style.css`).
#![forbid(unsafe_code)]

pub mod assets;
pub mod cluster;
pub mod hub;
pub mod model;
pub mod observe;
pub mod play;
pub mod server;
pub mod synthetic;
pub mod wire;

pub use cluster::{ClusterConfig, ClusterFeed, ClusterMerge};
pub use hub::{Hub, HubConfig, HubFull, HubStats};
pub use model::{KindInfo, NodeSample, ObjectSample, Rect, Tick, WorldInfo};
pub use observe::Observer;
pub use play::{ClusterGateway, Gateway, Play, PlayConfig};
pub use server::{ServeError, ServerHandle, router, router_with_play, serve, spawn, spawn_with_play};
pub use synthetic::SyntheticFeed;
