//! `worldmesh bots`: many headless players in one process (issue 16 item 5), each a real
//! client (QUIC, connect token, the client protocol) playing the model game's movement and
//! fighting: walk a direction for a while, turn, stop, fire at times. Reports, over every
//! client, input-to-visible latency (an input's send until the first view that reflects
//! it), bytes received, views, refusals and disconnects.

use anyhow::{Context as _, bail};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;
use worldmesh_client::proto::MAX_DATAGRAM;
use worldmesh_client::sdk::prediction::seq_newer;
use worldmesh_client::{Client, ClientConfig, ClientEvent, ConnectToken, TokenKey};
use worldmesh_core::{DetRng, NodeId, Time};
use worldmesh_game::{ModelObject, PlayerInput};
use worldmesh_net::players::PlayerEndpoint;
use worldmesh_netcoord::accuracy::quantile_sorted;

use crate::duration::parse_duration;

/// Arguments of `worldmesh bots`.
#[derive(clap::Args, Debug)]
pub struct BotsArgs {
    /// How many clients.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub clients: u32,
    /// The node's player port.
    #[arg(long, value_name = "ADDR")]
    pub server: SocketAddr,
    /// The node's id (its certificate must name it; tokens are issued for it).
    #[arg(long)]
    pub node: u32,
    /// The cluster CA certificate (`ca.pem`) the node's certificate must chain to.
    #[arg(long, value_name = "FILE")]
    pub ca: PathBuf,
    /// The connect-token key (the bots issue their own tokens, as a login service would).
    #[arg(long, value_name = "FILE")]
    pub player_key: PathBuf,
    /// How long to play.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Inputs per second per client.
    #[arg(long, default_value_t = 20.0)]
    pub input_hz: f64,
    /// Player id of the first client (the others follow).
    #[arg(long, default_value_t = 1_000_000)]
    pub first_player: u64,
    /// Seed of the bots' choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Start the clients over this long (not all at once).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub ramp: Duration,
    /// Churn: clients start over the first half of the run and each plays a random 20 to
    /// 100% of what remains, so joins and leaves interleave (instead of all playing to the
    /// end).
    #[arg(long)]
    pub churn: bool,
    /// Other nodes' player ports, `ID=ADDR` (comma-separated): where a hand-off sends a
    /// client.
    #[arg(long, value_delimiter = ',', value_parser = directory_entry)]
    pub directory: Vec<(u32, SocketAddr)>,
    /// Emulated client-to-node delays added to the measured RTTs the clients report for the
    /// assignment (`planetlab`, `uniform:RTT_MS` or a matrix file): node `i` takes row
    /// `i`, client `k` a row drawn from its player id (loopback RTTs alone are all alike).
    #[arg(long)]
    pub latency: Option<String>,
    /// With --latency: also delay every datagram between a client and its node by half the
    /// emulated round-trip time, each way (a WAN shim on the client side), so input-to-visible
    /// latency includes the emulated path.
    #[arg(long, requires = "latency")]
    pub wan: bool,
    /// Print the report as one JSON line (prefixed `WORLDMESH-BOTS `).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn directory_entry(s: &str) -> Result<(u32, SocketAddr), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected ID=ADDR"))?;
    let id = id.parse().map_err(|_| format!("`{id}` is not a node id"))?;
    let addr = addr.parse().map_err(|_| format!("`{addr}` is not an address"))?;
    Ok((id, addr))
}

/// Prefix of the JSON report line.
pub const BOTS_PREFIX: &str = "WORLDMESH-BOTS ";

/// What one client saw.
#[derive(Default)]
struct BotOutcome {
    connected: bool,
    refused: Option<String>,
    ended: Option<String>,
    latencies_ms: Vec<f64>,
    bytes_in: u64,
    bytes_out: u64,
    views: u64,
    inputs: u64,
    inputs_confirmed: u64,
    played_s: f64,
    handoff_ms: Vec<f64>,
}

/// The report.
#[derive(Debug, Serialize)]
pub struct BotsReport {
    /// Clients started.
    pub clients: u32,
    /// Clients the node accepted.
    pub connected: u32,
    /// Refusals by reason.
    pub refused: BTreeMap<String, u32>,
    /// Sessions that ended before the run did, by reason.
    pub disconnected: BTreeMap<String, u32>,
    /// Input-to-visible latency over every confirmed input of every client, ms: p50.
    pub latency_p50_ms: f64,
    /// p99.
    pub latency_p99_ms: f64,
    /// Largest.
    pub latency_max_ms: f64,
    /// Inputs sent, all clients.
    pub inputs: u64,
    /// Inputs confirmed applied (seen in a view), all clients.
    pub inputs_confirmed: u64,
    /// Bytes received per connected client per second, mean.
    pub bytes_in_per_client_s: f64,
    /// Bytes sent per connected client per second, mean.
    pub bytes_out_per_client_s: f64,
    /// Views per connected client per second, mean.
    pub views_per_client_s: f64,
    /// Hand-offs: how many, and the time from the hand-off message to the new node's
    /// acceptance, ms (p50, p99).
    pub handoffs: usize,
    /// p50 of hand-off times, ms.
    pub handoff_p50_ms: f64,
    /// p99 of hand-off times, ms.
    pub handoff_p99_ms: f64,
}

/// Runs the command.
pub fn run(args: BotsArgs) -> anyhow::Result<()> {
    if !(args.input_hz > 0.0 && args.input_hz <= 240.0) {
        bail!("--input-hz must be in (0, 240], got {}", args.input_hz);
    }
    let ca = worldmesh_net::pki::load_ca_cert(&args.ca)?;
    let key = crate::cmd_token::load_key(&args.player_key)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(play(&args, ca, key))?;
    if args.json {
        println!("{BOTS_PREFIX}{}", serde_json::to_string(&report)?);
    } else {
        print_report(&args, &report);
    }
    Ok(())
}

fn print_report(args: &BotsArgs, r: &BotsReport) {
    print_report_for(args.node, args.server, args.duration, r);
}

/// Prints the report of the bots that entered through node `node` at `server`.
pub fn print_report_for(node: u32, server: SocketAddr, duration: Duration, r: &BotsReport) {
    println!(
        "worldmesh bots: {} clients on node {} at {} for {:?}",
        r.clients, node, server, duration
    );
    println!("  connected            {}", r.connected);
    if !r.refused.is_empty() {
        println!("  refused              {:?}", r.refused);
    }
    if !r.disconnected.is_empty() {
        println!("  disconnected         {:?}", r.disconnected);
    }
    println!(
        "  input -> visible     p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        r.latency_p50_ms, r.latency_p99_ms, r.latency_max_ms
    );
    println!(
        "  inputs               {} sent, {} confirmed",
        r.inputs, r.inputs_confirmed
    );
    println!(
        "  per client           {:.0} B/s in, {:.0} B/s out, {:.1} views/s",
        r.bytes_in_per_client_s, r.bytes_out_per_client_s, r.views_per_client_s
    );
    if r.handoffs > 0 {
        println!(
            "  hand-offs            {} (p50 {:.1} ms, p99 {:.1} ms)",
            r.handoffs, r.handoff_p50_ms, r.handoff_p99_ms
        );
    }
}

/// Plays `args.clients` bots against one node and summarises what they saw.
pub async fn play(
    args: &BotsArgs,
    ca: worldmesh_net::players::CertificateDer<'static>,
    key: TokenKey,
) -> anyhow::Result<BotsReport> {
    let ep = PlayerEndpoint::new("0.0.0.0:0".parse().context("bind address")?, ca)?;
    let matrix = match &args.latency {
        Some(spec) => Some(std::sync::Arc::new(worldmesh_core::latency::load_spec(spec)?)),
        None => None,
    };
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..args.clients {
        let player = args.first_player + u64::from(i);
        let token = ConnectToken::new(
            player,
            vec![NodeId(args.node)],
            worldmesh_net::driver::unix_ms(),
            args.duration.as_millis() as u64 + 60_000,
        )?
        .issue(&key)?;
        let (delay, end) = if args.churn {
            let mut r = DetRng::new(args.seed ^ player);
            let delay = args.duration.mul_f64(0.5 * r.range_f64(0.0, 1.0));
            let life = (args.duration - delay).mul_f64(r.range_f64(0.2, 1.0));
            (delay, start + delay + life)
        } else {
            let delay = args.ramp.mul_f64(f64::from(i) / f64::from(args.clients));
            (delay, start + delay + args.duration)
        };
        let ep = ep.clone();
        let directory = args.directory.clone();
        let matrix = matrix.clone();
        let (server, node, hz, wan) = (args.server, NodeId(args.node), args.input_hz, args.wan);
        let seed = args.seed ^ player.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        tasks.spawn(async move {
            tokio::time::sleep_until(start + delay).await;
            let link = match ep.connect(server, node).await {
                Ok(l) => l,
                Err(e) => {
                    return BotOutcome {
                        refused: Some(format!("connect: {e}")),
                        ..BotOutcome::default()
                    };
                }
            };
            let rtts = measure(&ep, &link, node, &directory, matrix.as_deref(), player).await;
            bot(ep, link, node, rtts, &directory, token, end, hz, seed, wan).await
        });
    }
    let mut outcomes = Vec::new();
    while let Some(r) = tasks.join_next().await {
        outcomes.push(r.context("a bot task failed")?);
    }
    // Let the clients' closes reach the nodes before the endpoint goes.
    let _ = tokio::time::timeout(Duration::from_secs(1), ep.wait_idle()).await;
    Ok(summarise(args.clients, outcomes))
}

fn summarise(clients: u32, outcomes: Vec<BotOutcome>) -> BotsReport {
    let mut lat: Vec<f64> = outcomes
        .iter()
        .flat_map(|o| o.latencies_ms.iter().copied())
        .collect();
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| quantile_sorted(&lat, p);
    let mut ho: Vec<f64> = outcomes
        .iter()
        .flat_map(|o| o.handoff_ms.iter().copied())
        .collect();
    ho.sort_by(f64::total_cmp);
    let mut refused = BTreeMap::new();
    let mut disconnected = BTreeMap::new();
    for o in &outcomes {
        if let Some(r) = &o.refused {
            *refused.entry(r.clone()).or_default() += 1;
        }
        if let Some(r) = &o.ended {
            *disconnected.entry(r.clone()).or_default() += 1;
        }
    }
    let live: Vec<&BotOutcome> = outcomes
        .iter()
        .filter(|o| o.connected && o.played_s > 0.0)
        .collect();
    let mean = |f: &dyn Fn(&BotOutcome) -> f64| {
        if live.is_empty() {
            0.0
        } else {
            live.iter().map(|o| f(o) / o.played_s).sum::<f64>() / live.len() as f64
        }
    };
    BotsReport {
        clients,
        connected: outcomes.iter().filter(|o| o.connected).count() as u32,
        refused,
        disconnected,
        latency_p50_ms: q(0.5),
        latency_p99_ms: q(0.99),
        latency_max_ms: lat.last().copied().unwrap_or(f64::NAN),
        inputs: outcomes.iter().map(|o| o.inputs).sum(),
        inputs_confirmed: outcomes.iter().map(|o| o.inputs_confirmed).sum(),
        bytes_in_per_client_s: mean(&|o| o.bytes_in as f64),
        bytes_out_per_client_s: mean(&|o| o.bytes_out as f64),
        views_per_client_s: mean(&|o| o.views as f64),
        handoffs: ho.len(),
        handoff_p50_ms: quantile_sorted(&ho, 0.5),
        handoff_p99_ms: quantile_sorted(&ho, 0.99),
    }
}

/// The model game's movement and fighting, as a person might play it: hold a direction
/// for an exponential time (mean 1.5 s), sometimes stand still, fire in bursts.
struct Brain {
    rng: DetRng,
    input: PlayerInput,
    until: Instant,
}

impl Brain {
    fn next(&mut self, now: Instant) -> PlayerInput {
        if now >= self.until {
            let r = &mut self.rng;
            let dir = |r: &mut DetRng| (r.below(255) as i16 - 127) as i8;
            self.input = if r.chance(0.2) {
                PlayerInput::default()
            } else {
                PlayerInput {
                    dx: dir(r),
                    dy: dir(r),
                    fire: r.chance(0.3).then(|| (dir(r), dir(r))),
                }
            };
            self.until = now + Duration::from_secs_f64(r.exponential(1.5).min(10.0));
        }
        self.input
    }
}

/// Round-trip times from this client to every node it knows (the entry's connection and a
/// short connection to each other node), plus the emulated delay if a matrix is given.
async fn measure(
    ep: &PlayerEndpoint,
    link: &worldmesh_net::players::PlayerLink,
    entry: NodeId,
    directory: &[(u32, SocketAddr)],
    matrix: Option<&worldmesh_core::LatencyMatrix>,
    player: u64,
) -> Vec<(NodeId, f32)> {
    let mut rtts = vec![(entry, link.rtt())];
    for &(id, addr) in directory {
        if id != entry.0
            && let Ok(l) = ep.connect(addr, NodeId(id)).await
        {
            rtts.push((NodeId(id), l.rtt()));
            l.close();
        }
    }
    rtts.into_iter()
        .map(|(n, rtt)| {
            let emulated = matrix.map_or(0.0, |m| {
                let h = m.len().max(1);
                let client_row = (player.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) as usize % h;
                m.rtt_ms(client_row, n.0 as usize % h)
            });
            (n, rtt.as_secs_f32() * 1000.0 + emulated)
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
async fn bot(
    ep: PlayerEndpoint,
    mut link: worldmesh_net::players::PlayerLink,
    entry: NodeId,
    rtts: Vec<(NodeId, f32)>,
    directory: &[(u32, SocketAddr)],
    token: Vec<u8>,
    end: Instant,
    hz: f64,
    seed: u64,
    wan: bool,
) -> BotOutcome {
    // The client-side WAN shim: datagrams wait half the RTT to the current node, each way.
    let half_rtt = |n: NodeId| -> Duration {
        let ms = rtts.iter().find(|(m, _)| *m == n).map_or(0.0, |(_, d)| *d);
        if wan {
            Duration::from_secs_f64(f64::from(ms.max(0.0)) / 2000.0)
        } else {
            Duration::ZERO
        }
    };
    let mut one_way = half_rtt(entry);
    let mut outq: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut inq: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut out = BotOutcome::default();
    let origin = Instant::now();
    let t = |i: Instant| Time::from_micros(i.saturating_duration_since(origin).as_micros() as u64);
    let mut client: Client<ModelObject> = Client::new(ClientConfig::default(), token, t(origin));
    let mut brain = Brain {
        rng: DetRng::new(seed),
        input: PlayerInput::default(),
        until: origin,
    };
    let period = Duration::from_secs_f64(1.0 / hz);
    let mut next_input = origin;
    let mut sent_at: VecDeque<(u32, Instant)> = VecDeque::new();
    let mut connected_at = None;
    let mut handing: Option<Instant> = None;
    client.set_delays(t(origin), rtts.clone());
    client.handle_timeout(t(origin));
    loop {
        let now = Instant::now();
        while inq.front().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, b)) = inq.pop_front() {
                client.handle_datagram(t(now), &b);
            }
        }
        while let Some(b) = client.poll_transmit() {
            if b.len() <= MAX_DATAGRAM {
                outq.push_back((now + one_way, b));
            }
        }
        while outq.front().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, b)) = outq.pop_front() {
                link.send(b);
            }
        }
        let mut stop = false;
        while let Some(e) = client.poll_event() {
            match e {
                ClientEvent::Connected { .. } => {
                    out.connected = true;
                    connected_at.get_or_insert(now);
                    if let Some(h) = handing.take() {
                        out.handoff_ms.push(now.duration_since(h).as_secs_f64() * 1000.0);
                    }
                }
                ClientEvent::HandOff { node, token } => {
                    let Some(&(_, addr)) = directory.iter().find(|(id, _)| *id == node.0) else {
                        out.ended = Some(format!("HandOff to node {} not in --directory", node.0));
                        stop = true;
                        continue;
                    };
                    handing = Some(now);
                    link.close();
                    outq.clear();
                    inq.clear();
                    one_way = half_rtt(node);
                    match ep.connect(addr, node).await {
                        Ok(l) => link = l,
                        Err(e) => {
                            out.ended = Some(format!("HandOff connect: {e}"));
                            stop = true;
                            continue;
                        }
                    }
                    client.hand_over(t(Instant::now()), token);
                }
                ClientEvent::Refused(r) => {
                    out.refused = Some(format!("{r:?}"));
                    stop = true;
                }
                ClientEvent::Disconnected(r) => {
                    out.ended = Some(format!("{r:?}"));
                    stop = true;
                }
                ClientEvent::TimedOut => {
                    out.ended = Some("TimedOut".into());
                    stop = true;
                }
                ClientEvent::View { .. } => {
                    if let Some(last) = client.view().and_then(|v| v.last_input) {
                        while let Some(&(seq, at)) = sent_at.front() {
                            if seq_newer(seq, last) {
                                break;
                            }
                            out.latencies_ms
                                .push(now.duration_since(at).as_secs_f64() * 1000.0);
                            out.inputs_confirmed += 1;
                            sent_at.pop_front();
                        }
                    }
                }
            }
        }
        if stop {
            break;
        }
        if now >= end {
            client.disconnect(t(now));
            while let Some(b) = client.poll_transmit() {
                link.send(b);
            }
            break;
        }
        let timer = client
            .poll_timeout()
            .map_or(end, |x| origin + Duration::from_micros(x.0))
            .min(end);
        let input_due = connected_at.is_some().then_some(next_input);
        let shim_due = outq
            .front()
            .map(|(d, _)| *d)
            .into_iter()
            .chain(inq.front().map(|(d, _)| *d))
            .min();
        tokio::select! {
            d = link.recv() => match d {
                Some(b) => inq.push_back((Instant::now() + one_way, b.to_vec())),
                None => {
                    out.ended.get_or_insert_with(|| "ConnectionClosed".into());
                    break;
                }
            },
            _ = tokio::time::sleep_until(input_due.unwrap_or(end)), if input_due.is_some() => {
                let now = Instant::now();
                let input = brain.next(now);
                if let Some(seq) = client.send_input(t(now), &input) {
                    sent_at.push_back((seq, now));
                    if sent_at.len() > 4096 {
                        sent_at.pop_front();
                    }
                    out.inputs += 1;
                }
                next_input += period;
                if next_input < now {
                    next_input = now + period;
                }
            }
            _ = tokio::time::sleep_until(timer) => client.handle_timeout(t(Instant::now())),
            _ = tokio::time::sleep_until(shim_due.unwrap_or(end)), if shim_due.is_some() => {}
        }
    }
    link.close();
    let s = client.stats();
    out.bytes_in = s.bytes_in;
    out.bytes_out = s.bytes_out;
    out.views = s.views;
    out.played_s = connected_at.map_or(0.0, |c| Instant::now().duration_since(c).as_secs_f64());
    out
}
