//! Who listens to a configuration item on this node: the HTTP long polls it holds right
//! now ([`LongPolls`]) and the gRPC connections that listen (`faces::grpc::connection`), each a
//! [`ListenerList`] — the API lists them all without knowing either (as naming's
//! subscriber list does).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::ConfigKey;

/// One listener of an item, as the listener query shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerView {
    /// The client's address (gRPC: `ip:port`, the IP its own idea of it, else the
    /// peer's; HTTP: the peer's IP).
    pub address: String,
    /// `http` (a long poll held now) or `grpc`.
    pub protocol: &'static str,
    /// What the client says it is (gRPC `clientVersion`, HTTP `User-Agent`).
    pub client: String,
    /// The md5 of the content it holds (empty: none).
    pub md5: String,
}

/// The listeners of an item over one protocol.
pub trait ListenerList: Send + Sync {
    /// The listeners of `key` on this node.
    fn listeners(&self, key: &ConfigKey) -> Vec<ListenerView>;

    /// What the clients at `ip` listen to on this node: each item and the md5 held.
    fn listened_by(&self, ip: &str) -> Vec<(ConfigKey, String)>;
}

/// A long poll being held: who, and what it listens to with which md5.
struct Held {
    address: String,
    client: String,
    items: Vec<(ConfigKey, String)>,
}

/// The HTTP long polls this node holds. Cheap to clone.
#[derive(Clone, Default)]
pub struct LongPolls(Arc<Polls>);

#[derive(Default)]
struct Polls {
    held: Mutex<HashMap<u64, Held>>,
    next: AtomicU64,
}

/// Keeps a long poll listed until dropped (the poll answered, or its client went).
pub struct Holding {
    polls: LongPolls,
    id: u64,
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.polls.0.held.lock().remove(&self.id);
    }
}

impl LongPolls {
    /// Lists a long poll from `address` (`client`: its user agent) listening to
    /// `items` (key, md5 held) while the returned guard lives.
    pub fn hold(
        &self,
        address: String,
        client: String,
        items: Vec<(ConfigKey, String)>,
    ) -> Holding {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        self.0.held.lock().insert(
            id,
            Held {
                address,
                client,
                items,
            },
        );
        Holding {
            polls: self.clone(),
            id,
        }
    }

    /// How many long polls are held now.
    pub fn count(&self) -> usize {
        self.0.held.lock().len()
    }
}

impl ListenerList for LongPolls {
    fn listeners(&self, key: &ConfigKey) -> Vec<ListenerView> {
        let held = self.0.held.lock();
        let mut out: Vec<ListenerView> = held
            .values()
            .filter_map(|h| {
                let (_, md5) = h.items.iter().find(|(k, _)| k == key)?;
                Some(ListenerView {
                    address: h.address.clone(),
                    protocol: "http",
                    client: h.client.clone(),
                    md5: md5.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.address.cmp(&b.address));
        out
    }

    fn listened_by(&self, ip: &str) -> Vec<(ConfigKey, String)> {
        let held = self.0.held.lock();
        held.values()
            .filter(|h| h.address == ip)
            .flat_map(|h| h.items.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_poll_is_listed_while_held() {
        let polls = LongPolls::default();
        let key = ConfigKey::new("", "G", "a");
        let other = ConfigKey::new("", "G", "b");
        let held = polls.hold(
            "127.0.0.1:5000".into(),
            "Nacos-Python-Client".into(),
            vec![(key.clone(), "m1".into())],
        );
        let seen = polls.listeners(&key);
        assert_eq!(seen.len(), 1);
        assert_eq!((seen[0].protocol, seen[0].md5.as_str()), ("http", "m1"));
        assert!(polls.listeners(&other).is_empty());
        assert_eq!(
            polls.listened_by("127.0.0.1:5000"),
            [(key.clone(), "m1".into())]
        );
        assert!(polls.listened_by("127.0.0.2").is_empty());
        drop(held);
        assert!(polls.listeners(&key).is_empty());
        assert_eq!(polls.count(), 0);
    }
}
