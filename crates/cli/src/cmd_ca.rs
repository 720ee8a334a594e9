//! `worldmesh ca`: the cluster certificate authority (issue 13). `ca init` makes the CA,
//! `ca issue` signs a node certificate with it; nodes accept only peers whose certificate
//! chains to this CA and names the node id they claim.

use anyhow::Context as _;
use std::path::PathBuf;
use worldmesh_core::NodeId;
use worldmesh_net::pki::{self, DEFAULT_CA_DAYS, DEFAULT_NODE_DAYS, Overwrite};

const CA_HELP: &str = "\
FILES:
  DIR/ca.pem            the CA certificate: give it to every node (it is public)
  DIR/ca.key            the CA private key (mode 0600): keep it off the nodes; whoever holds
                        it can mint members
  OUT/node-<ID>.pem     a node's certificate (leaf, then the CA certificate), naming
                        node-<ID>.worldmesh, for TLS client and server authentication
  OUT/node-<ID>.key     that node's private key (mode 0600)

EXAMPLE:
  worldmesh ca init --dir ca --name \"my world\"
  worldmesh ca issue --dir ca --node 0 --out node0
  worldmesh ca issue --dir ca --node 1 --out node1 --days 30";

/// Arguments of `worldmesh ca`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = CA_HELP)]
pub struct CaArgs {
    #[command(subcommand)]
    command: CaCommand,
}

#[derive(clap::Subcommand, Debug)]
enum CaCommand {
    /// Create a new cluster CA: writes DIR/ca.pem and DIR/ca.key.
    Init(InitArgs),
    /// Sign a certificate for one node with the CA in DIR: writes OUT/node-<ID>.pem and
    /// OUT/node-<ID>.key.
    Issue(IssueArgs),
}

#[derive(clap::Args, Debug)]
#[command(after_long_help = CA_HELP)]
struct InitArgs {
    /// Directory to write ca.pem and ca.key into (created if missing).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The CA's name (its certificate's common name), 1 to 64 characters.
    #[arg(long, default_value = "worldmesh cluster CA")]
    name: String,
    /// How long the CA certificate is valid, in days.
    #[arg(long, default_value_t = DEFAULT_CA_DAYS, value_parser = clap::value_parser!(u32).range(1..=36_500))]
    days: u32,
    /// Replace an existing ca.pem / ca.key (every node certificate signed by the old CA
    /// stops being accepted).
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args, Debug)]
#[command(after_long_help = CA_HELP)]
struct IssueArgs {
    /// Directory holding the CA (ca.pem and ca.key, from `worldmesh ca init`).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The node id the certificate names (node-<ID>.worldmesh).
    #[arg(long, value_name = "ID")]
    node: u32,
    /// Directory to write node-<ID>.pem and node-<ID>.key into [default: the CA's DIR].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// How long the node certificate is valid, in days.
    #[arg(long, default_value_t = DEFAULT_NODE_DAYS, value_parser = clap::value_parser!(u32).range(1..=36_500))]
    days: u32,
    /// Replace an existing node-<ID>.pem / node-<ID>.key.
    #[arg(long)]
    force: bool,
}

fn overwrite(force: bool) -> Overwrite {
    if force {
        Overwrite::Replace
    } else {
        Overwrite::Refuse
    }
}

/// Runs `worldmesh ca`.
pub fn run(args: CaArgs) -> anyhow::Result<()> {
    match args.command {
        CaCommand::Init(a) => {
            let files = pki::init_ca(&a.dir, &a.name, a.days, overwrite(a.force)).context("ca init")?;
            println!("CA {:?} valid for {} days", a.name.trim(), a.days);
            println!("  certificate  {}", files.cert.display());
            println!("  private key  {}  (keep it off the nodes)", files.key.display());
            println!("next: worldmesh ca issue --dir {} --node 0", a.dir.display());
        }
        CaCommand::Issue(a) => {
            let out = a.out.unwrap_or_else(|| a.dir.clone());
            let node = NodeId(a.node);
            let files =
                pki::issue_node(&a.dir, node, &out, a.days, overwrite(a.force)).context("ca issue")?;
            println!(
                "node {} ({}) valid for {} days",
                a.node,
                pki::node_name(node),
                a.days
            );
            println!("  certificate  {}", files.cert.display());
            println!("  private key  {}", files.key.display());
            println!("  CA           {}", a.dir.join(pki::CA_CERT_FILE).display());
        }
    }
    Ok(())
}
