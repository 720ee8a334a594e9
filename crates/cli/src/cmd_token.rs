//! `worldmesh token`: the connect-token key and tokens (issue 16). `token init` writes a
//! fresh key (the secret the game's backend and the cluster's nodes share); `token issue`
//! signs a token for one player, as a game's login service would.

use anyhow::{Context as _, bail};
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;
use worldmesh_client::token::{MAX_TOKEN_LIFETIME_MS, MAX_TOKEN_NODES};
use worldmesh_client::{ConnectToken, TokenKey};
use worldmesh_core::NodeId;

use crate::duration::parse_duration;

const TOKEN_HELP: &str = "\
FILES:
  KEY    64 hex digits (mode 0600). Every node admitting players reads it (--player-key);
         whoever holds it can let anyone in: keep it on the nodes and the login service.

EXAMPLE:
  worldmesh token init --out client.key
  worldmesh token issue --key client.key --player 42 --nodes 0,1 --ttl 1h";

/// Arguments of `worldmesh token`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = TOKEN_HELP)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TokenCommand {
    /// Write a new random key to OUT (refuses to overwrite without --force).
    Init {
        /// The key file.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Replace an existing key (every token issued with the old one stops working).
        #[arg(long)]
        force: bool,
    },
    /// Print a connect token (hex) for one player.
    Issue {
        /// The key file.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// The player's id (the game's account id).
        #[arg(long)]
        player: u64,
        /// Nodes the player may connect to (comma-separated ids).
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<u32>,
        /// How long the token is valid (at most 24h).
        #[arg(long, default_value = "1h", value_parser = parse_duration)]
        ttl: Duration,
    },
}

/// Reads a key file.
pub fn load_key(path: &std::path::Path) -> anyhow::Result<TokenKey> {
    Ok(worldmesh::server::load_token_key(path)?)
}

/// Runs the command.
pub fn run(args: TokenArgs) -> anyhow::Result<()> {
    match args.command {
        TokenCommand::Init { out, force } => {
            let key = TokenKey::generate()?;
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true);
            if force {
                opts.create(true).truncate(true);
            } else {
                opts.create_new(true);
            }
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                opts.mode(0o600);
            }
            let mut f = opts.open(&out).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    anyhow::anyhow!("{} exists: give --force to replace it", out.display())
                } else {
                    anyhow::anyhow!("{}: cannot write: {e}", out.display())
                }
            })?;
            f.write_all(key.to_hex().as_bytes())
                .with_context(|| format!("{}: cannot write", out.display()))?;
            eprintln!("wrote {}", out.display());
            Ok(())
        }
        TokenCommand::Issue {
            key,
            player,
            nodes,
            ttl,
        } => {
            if nodes.len() > MAX_TOKEN_NODES {
                bail!("--nodes: at most {MAX_TOKEN_NODES} nodes, got {}", nodes.len());
            }
            let ttl_ms = ttl.as_millis();
            if ttl_ms == 0 || ttl_ms > u128::from(MAX_TOKEN_LIFETIME_MS) {
                bail!("--ttl must be in (0, 24h], got {ttl:?}");
            }
            let key = load_key(&key)?;
            let t = ConnectToken::new(
                player,
                nodes.into_iter().map(NodeId).collect(),
                worldmesh_net::driver::unix_ms(),
                ttl_ms as u64,
            )?;
            println!("{}", worldmesh_client::token::to_hex(&t.issue(&key)?));
            Ok(())
        }
    }
}
