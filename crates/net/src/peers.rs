//! Static membership: which node listens where.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use worldmesh_core::NodeId;

/// Why a peer list is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// An entry is not `ID=HOST:PORT`.
    #[error("peer `{0}`: expected ID=HOST:PORT, e.g. 1=127.0.0.1:7001")]
    Syntax(String),
    /// The same node id twice.
    #[error("node {0} is listed twice")]
    DuplicateId(NodeId),
    /// The same address twice.
    #[error("address {0} is listed twice")]
    DuplicateAddr(SocketAddr),
}

/// Node ids and their UDP addresses, both ways.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerTable {
    by_id: BTreeMap<NodeId, SocketAddr>,
    by_addr: HashMap<SocketAddr, NodeId>,
}

impl PeerTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node.
    pub fn insert(&mut self, id: NodeId, addr: SocketAddr) -> Result<(), PeerError> {
        if self.by_id.contains_key(&id) {
            return Err(PeerError::DuplicateId(id));
        }
        if self.by_addr.contains_key(&addr) {
            return Err(PeerError::DuplicateAddr(addr));
        }
        self.by_id.insert(id, addr);
        self.by_addr.insert(addr, id);
        Ok(())
    }

    /// Parses `ID=HOST:PORT`.
    pub fn parse_entry(s: &str) -> Result<(NodeId, SocketAddr), PeerError> {
        let (id, addr) = s.split_once('=').ok_or_else(|| PeerError::Syntax(s.into()))?;
        let id: u32 = id.trim().parse().map_err(|_| PeerError::Syntax(s.into()))?;
        let addr: SocketAddr = addr.trim().parse().map_err(|_| PeerError::Syntax(s.into()))?;
        Ok((NodeId(id), addr))
    }

    /// The address of `id`.
    pub fn addr(&self, id: NodeId) -> Option<SocketAddr> {
        self.by_id.get(&id).copied()
    }

    /// The node at `addr`.
    pub fn id(&self, addr: SocketAddr) -> Option<NodeId> {
        self.by_addr.get(&addr).copied()
    }

    /// Every node id, ascending.
    pub fn ids(&self) -> Vec<NodeId> {
        self.by_id.keys().copied().collect()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_duplicates() {
        let (id, a) = PeerTable::parse_entry("3=127.0.0.1:7003").unwrap();
        assert_eq!((id, a.port()), (NodeId(3), 7003));
        assert!(PeerTable::parse_entry("3:127.0.0.1:1").is_err());
        assert!(PeerTable::parse_entry("x=127.0.0.1:1").is_err());
        assert!(PeerTable::parse_entry("1=localhost").is_err());
        let mut t = PeerTable::new();
        t.insert(id, a).unwrap();
        assert_eq!(
            t.insert(id, "127.0.0.1:9".parse().unwrap()),
            Err(PeerError::DuplicateId(id))
        );
        assert_eq!(t.insert(NodeId(4), a), Err(PeerError::DuplicateAddr(a)));
        assert_eq!(t.id(a), Some(id));
    }
}
