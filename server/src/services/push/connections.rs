//! The gRPC connections of this node as the HTTP face sees them ([`ConnectionList`]):
//! what each client said about itself and subscribed to, and the one thing done to a
//! connection from outside, asking its client to move to another node
//! (`ConnectResetRequest`). The connections themselves belong to the gRPC face.

use roster_registry::service::ServiceKey;

/// One connection, as Nacos 3's admin API shows it.
#[derive(Clone, Debug, Default)]
pub struct ConnectionView {
    /// `<first seen ms>_<ip>_<port>`, Nacos' connection id.
    pub id: String,
    /// The registry client that owns its instances (`g:<node>:<id>`).
    pub client: String,
    /// The transport's peer address and port.
    pub remote_ip: String,
    /// See `remote_ip`.
    pub remote_port: u16,
    /// The client's own idea of its address (empty: it gave none).
    pub client_ip: String,
    /// e.g. `Nacos-Java-Client:v2.5.1`.
    pub version: String,
    /// Its namespace, as the client gave it.
    pub tenant: String,
    /// The labels it sent at setup.
    pub labels: Vec<(String, String)>,
    /// When it was set up, wall-clock ms.
    pub created_ms: u64,
    /// When the client was last heard from, wall-clock ms.
    pub last_active_ms: u64,
    /// The services it subscribes to, with the clusters string it gave.
    pub subscriptions: Vec<(ServiceKey, String)>,
}

impl ConnectionView {
    /// The application it names (`AppName` label), or `unknown`.
    pub fn app_name(&self) -> &str {
        ["AppName", "appName", "app"]
            .iter()
            .find_map(|k| self.labels.iter().find(|(l, _)| l == k))
            .map_or("unknown", |(_, v)| v.as_str())
    }

    /// The client's address as subscriber lists show it: its own idea of its IP (which
    /// beats a NAT's), else the peer's.
    pub fn ip(&self) -> &str {
        if self.client_ip.is_empty() {
            &self.remote_ip
        } else {
            &self.client_ip
        }
    }
}

/// Where a client asked to move should connect: Nacos' `serverIp` and `serverPort`
/// (the node's main port; clients add their gRPC offset). `None`: a node of the
/// client's own choosing.
pub type Redirect<'a> = Option<(&'a str, &'a str)>;

/// The gRPC connections of this node.
pub trait ConnectionList: Send + Sync {
    /// Every connection, ordered by id.
    fn connections(&self) -> Vec<ConnectionView>;

    /// How many connections there are (without building their views).
    fn count(&self) -> usize;

    /// Every connection's id and set-up time (wall-clock ms), unordered.
    fn created(&self) -> Vec<(String, u64)>;

    /// Asks the client of connection `id` to reconnect (to `redirect`, if given);
    /// false when there is no such connection here or its stream is backed up.
    fn reset(&self, id: &str, redirect: Redirect<'_>) -> bool;
}
