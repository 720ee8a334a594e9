//! One node of a Beacons world: `beacons NODE.toml` (see `docs/guide/tutorial.md`).
//!
//! Prints a status line every second — `node 0: 3 members, 4 primaries, 8 replicas, 1
//! beacons lit 37 times` — and stops on SIGTERM or Ctrl-C (a graceful drain: its objects
//! move to the other nodes) or SIGQUIT (a stop that keeps them in its store).

// ANCHOR: main
use std::sync::Arc;
use std::time::Duration;

use beacons::{SPEED, Thing, field, founders_share};
use worldmesh::{Aabb, Point3, Role, ServeOptions, Server, Space};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = std::env::args().nth(1).ok_or("usage: beacons NODE.toml")?;
    let size = field().size;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut node = Server::builder()
            .game::<Thing>(Arc::new(field()))
            .config(&config)?
            .space(Space {
                bounds: Aabb::from_corners(Point3::new(0.0, 0.0, -1.0), Point3::new(size, size, 1.0)),
                regions: 64,
                max_speed: SPEED,
            })
            .initial_objects(|me| founders_share(me, &field()))
            .start()
            .await?;
        let me = node.ready().node.0;
        println!("node {me}: listening on {}", node.ready().addr);
        node.begin().await;
        // A status line every second, from a task of its own.
        let control = node.control();
        tokio::spawn(async move {
            while let Some(s) = control.snapshot(None).await {
                println!(
                    "node {me}: {} members, {} primaries, {} replicas",
                    s.members.len() + 1,
                    s.summary.primaries,
                    s.summary.replicas
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let done = node.serve(ServeOptions::default(), |_event| {}).await?;
        let (beacons, lit) = beacons::beacons_lit(
            done.node
                .store()
                .iter()
                .filter(|(_, e)| e.role == Role::Primary)
                .map(|(_, e)| &e.object),
        );
        println!("node {me}: stopped holding {beacons} beacons, lit {lit} times");
        Ok(())
    })
}
// ANCHOR_END: main
